#include "pipelines/calibrate/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "analysis/metrics.h"
#include "common/check.h"
#include "pipelines/plan_evaluation.h"

namespace quantkit::pipelines {

int64_t CheckSampleCount(int64_t requested, int64_t calibrated) {
  if (requested >= 0) return requested;
  return std::clamp(calibrated / kCheckShareDivisor, kCheckMinSamples, kCheckMaxSamples);
}

Status ChooseCheckData(const CheckOptions& options, const CheckedCalibration& source,
                       analysis::PlanEvalOptions* eval, CheckResult* result) {
  const int64_t n = CheckSampleCount(options.samples, source.calibrated);
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInternal, "a check of {} samples", n);
  eval->model = source.model;
  if (!options.holdout.empty()) {
    eval->data = options.holdout;
    eval->first_sample = 0;
    eval->samples = options.holdout_samples > 0 ? options.holdout_samples : n;
    result->origin = "held-out (--holdout)";
    return Status::Ok();
  }
  QK_RETURN_IF_NOT(!source.data.empty() && source.data_total > 0, StatusCode::kInvalidArgument,
                   "no data to check the calibration on (statistics only): give --holdout SPEC");
  eval->data = source.data;
  if (source.data_total > source.calibrated) {
    // The samples that follow the calibrated ones: never seen by the calibration.
    eval->first_sample = source.calibrated;
    eval->samples = std::min(n, source.data_total - source.calibrated);
    result->origin = "held-out";
  } else {
    // All of the data was calibrated on: its tail, which the summary calls in-sample.
    eval->samples = std::min(n, source.data_total);
    eval->first_sample = source.data_total - eval->samples;
    result->origin = "in-sample";
    result->in_sample = true;
  }
  result->first_sample = eval->first_sample;
  return Status::Ok();
}

Status JudgePlan(const analysis::PlanEvaluator& evaluator, const quant::QuantPlan& plan,
                 const std::string& plan_path, bool own_evaluator, CheckResult* result) {
  CheckResult& r = *result;
  const auto start = std::chrono::steady_clock::now();
  // The metric rule of analyze and --budget: top-1 and agreement on a class vector with labels,
  // agreement without; rel_mse alone otherwise (always read from the output's error statistics).
  QK_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<analysis::Metric>> owned,
                      AnalyzeMetrics({}, evaluator));
  const std::vector<analysis::Metric*> metrics = analysis::MetricPointers(owned);
  QK_ASSIGN_OR_RETURN(analysis::TrialResult trial, evaluator.EvaluatePlan(plan, metrics));
  r.ran = true;
  r.data = evaluator.data_description();
  r.samples = evaluator.num_samples();
  r.class_output = evaluator.class_output();
  r.rel_mse = trial.output.relative_mse();
  r.sqnr_db = trial.output.sqnr_db();
  if (auto it = trial.metrics.find("agreement"); it != trial.metrics.end())
    r.agreement = it->second;
  if (auto it = trial.metrics.find("top1"); it != trial.metrics.end()) {
    r.top1 = it->second;
    analysis::Top1Metric top1;
    QK_ASSIGN_OR_RETURN(analysis::TrialResult fp32, evaluator.EvaluateFp32({&top1}));
    r.fp32_top1 = fp32.metrics.at("top1");
  }
  // The evaluator's FP32 run (made when it was created) is part of the check's cost when the
  // evaluator was made for it.
  r.seconds = (own_evaluator ? evaluator.fp32_seconds() : 0.0) +
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Non-finite outputs fail the check whatever the agreement says: argmax of NaN logits agrees with
  // itself (a model whose biases were all NaN once scored "agreement 100%").
  const bool fp32_non_finite = !std::isfinite(trial.output.ref2);
  r.fp32_non_finite = fp32_non_finite;
  const bool written_non_finite =
      !fp32_non_finite && !(std::isfinite(trial.output.out2) && std::isfinite(trial.output.err2));
  if (fp32_non_finite || written_non_finite) {
    r.warning =
        fp32_non_finite
            ? fmt::format(
                  "check: the FP32 model's own output is not finite (NaN/Inf) on the {} {} samples "
                  "of {}: the data holds non-finite values (or the model overflows), so neither "
                  "the calibration nor this check can be trusted; clean the data",
                  r.samples, r.origin, evaluator.options().data)
            : fmt::format(
                  "check: the written model outputs NaN/Inf on the {} {} samples of {} where FP32 is "
                  "finite: the model is broken; calibrate again without --ptq, or see which tensor "
                  "breaks it: quantkit analyze {} --plan {} --data {}",
                  r.samples, r.origin, evaluator.options().data, evaluator.options().model,
                  plan_path.empty() ? "plan.json" : plan_path, evaluator.options().data);
    return Status::Ok();
  }
  const bool bad_agreement = r.class_output && !(r.agreement >= kCheckMinAgreement);
  const bool bad_output = !r.class_output && !(r.rel_mse <= kCheckMaxRelMse);
  if (bad_agreement || bad_output) {
    const std::string figure =
        bad_agreement ? fmt::format("top-1 agreement with FP32 is {:.1f}% (threshold {:.0f}%)",
                                    100 * r.agreement, 100 * kCheckMinAgreement)
                      : fmt::format("output rel MSE vs FP32 is {:.3g} (threshold {:.0e})",
                                    r.rel_mse, kCheckMaxRelMse);
    // The stages are named only when none ran: on the shipped PP-OCRv4 recognizer they took max's
    // 0.862 accuracy to 0.994 (FP32 0.996) without float layers (docs/ptq.md).
    const std::string stages =
        plan.provenance.stages.empty()
            ? "`--ptq smoothquant,bias-correction` (label-free: activation outliers moved into the weights, then "
              "the output shift corrected; no float layers), "
            : "";
    r.warning = fmt::format(
        "check: the written model loses accuracy: {} on {} {} samples. Fixes: {}`--method auto` (the best method "
        "on held-out data, refined per tensor), `--budget {}` (keeps the fewest layers in float that bring it "
        "within budget), or see which tensors cost it: quantkit analyze {} --plan {} --data {}",
        figure, r.samples, r.origin, stages, bad_agreement ? "0.5" : "0.01 --metric rel_mse",
        evaluator.options().model, plan_path.empty() ? "plan.json" : plan_path,
        evaluator.options().data);
  }
  return Status::Ok();
}

std::string FormatCheck(const CheckResult& r) {
  if (!r.ran) return r.skipped.empty() ? "" : "check: skipped: " + r.skipped + "\n";
  std::string s =
      fmt::format("check: {} {} samples ({}{}), ", r.samples, r.origin, r.data,
                  r.in_sample ? "; the calibration used all of the data: give --holdout SPEC or "
                                "fewer --samples for a held-out figure"
                              : "");
  if (r.class_output) s += fmt::format("top-1 agreement {:.1f}%, ", 100 * r.agreement);
  if (!std::isnan(r.top1)) s += fmt::format("top-1 {:.4f} (FP32 {:.4f}), ", r.top1, r.fp32_top1);
  s += fmt::format("output rel MSE {:.2g} vs FP32 ({:.2f} s; calibration {:.2f} s)\n", r.rel_mse,
                   r.seconds, r.calibration_seconds);
  if (!r.warning.empty()) s += "warning: " + r.warning + "\n";
  return s;
}

}  // namespace quantkit::pipelines
