#include "pipelines/calibration_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include "analysis/collect_pass.h"
#include "analysis/plan_eval.h"
#include "common/check.h"
#include "data/source.h"
#include "pipelines/calibrate.h"

namespace quantkit::pipelines {
namespace {

// Points for a class metric, the relative MSE otherwise: what `ruined` compares.
bool ClassMetric(const std::string& metric) { return metric != "rel_mse"; }

void Judge(CheckResult* r) {
  if (ClassMetric(r->metric)) {
    r->threshold = kCheckMaxLossPoints;
    const double changed = r->loss * static_cast<double>(r->samples) / 100.0;
    r->ruined = r->loss > kCheckMaxLossPoints && changed >= kCheckMinChangedSamples - 1e-9;
  } else {
    r->threshold = kCheckMaxRelMse;
    // A NaN/inf output error is a ruined model too.
    r->ruined = !(r->output.relative_mse() <= kCheckMaxRelMse);
  }
}

}  // namespace

int64_t CheckSampleCount(int64_t total) {
  if (total <= kCheckMinSamples) return total;
  return std::clamp(total / kCheckShareDivisor, kCheckMinSamples, kCheckMaxSamples);
}

Result<CheckResult> CheckPlan(const CalibrateOptions& options, const LoadedModel& model,
                              const quant::QuantPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  CheckResult r;
  const CheckOptions& check = options.check;
  QK_RETURN_IF_NOT(check.samples >= -1, StatusCode::kInvalidArgument,
                   "--check-samples must be >= 0 (0: no check), got {}", check.samples);
  if (check.samples == 0) {
    r.not_run = "off (--check-samples 0)";
    return r;
  }
  const bool held_out = !check.holdout.empty();
  if (!held_out && options.data.empty()) {
    r.not_run = "no samples to run (the plan comes from statistics); give --holdout SPEC to check it";
    return r;
  }
  analysis::PlanEvalOptions eval;
  eval.model = options.model;
  eval.loaded_model = model.model;
  eval.data = held_out ? check.holdout : options.data;
  eval.image = options.image;
  eval.simulation.placement = options.placement;
  eval.simulation.mode = analysis::PlacementMode::kTensorRT;
  // Runs as calibration cuts them: the model sees batches it was calibrated with.
  const int64_t run_batch = analysis::CalibrationRunBatch(data::ModelInputs(*model.model), options.run_batch);
  eval.batch_size = run_batch;
  eval.spread_block = run_batch;
  if (!held_out) eval.samples = options.samples;  // the calibration data's --samples cap
  const int64_t asked = check.samples;
  eval.spread_samples = [held_out, asked](int64_t total) -> int64_t {
    if (asked > 0) return std::min(asked, total);
    return held_out ? std::min(total, kCheckMaxSamples) : CheckSampleCount(total);
  };
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::PlanEvaluator> evaluator, analysis::PlanEvaluator::Create(eval));
  r.metric = analysis::DefaultMetricName(evaluator->has_labels(), evaluator->class_output());
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(r.metric));
  QK_ASSIGN_OR_RETURN(analysis::TrialResult fp32, evaluator->EvaluateFp32({metric.get()}));
  QK_ASSIGN_OR_RETURN(analysis::TrialResult int8, evaluator->EvaluatePlan(plan, {metric.get()}));
  r = CheckFromEvaluation(r.metric, fp32.metrics.at(r.metric), int8.metrics.at(r.metric), int8.output,
                          evaluator->num_samples(), evaluator->data_description());
  r.held_out = held_out;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return r;
}

CheckResult CheckFromEvaluation(const std::string& metric, double fp32_value, double value,
                                const analysis::ErrorStats& output, int64_t samples, const std::string& data) {
  CheckResult r;
  r.ran = true;
  r.held_out = true;
  r.metric = metric;
  r.fp32_value = fp32_value;
  r.value = value;
  r.output = output;
  r.samples = samples;
  r.data = data;
  r.loss = ClassMetric(metric) ? 100.0 * (fp32_value - value) : output.relative_mse();
  Judge(&r);
  return r;
}

std::string FormatCheck(const CheckResult& c) {
  if (!c.ran) return "check: not run: " + c.not_run + "\n";
  const double rel_mse = c.output.relative_mse();
  std::string figure =
      ClassMetric(c.metric)
          ? fmt::format("{} {:.2f}% (FP32 {:.2f}%, loss {:.2f} points, limit {:g}), output rel MSE {:.3g}",
                        c.metric, 100 * c.value, 100 * c.fp32_value, c.loss, c.threshold, rel_mse)
          : fmt::format("output rel MSE {:.3g} (rel RMS error {:.3g}, limit {:g})", rel_mse,
                        std::sqrt(rel_mse), c.threshold);
  // No timing here: the summary's last line carries it (summaries are compared without it).
  return fmt::format("check: INT8 vs FP32 on {} {}: {}, SQNR {:.1f} dB: {}\n", c.data,
                     c.held_out ? "(held out)" : "(also calibrated on)", figure, c.output.sqnr_db(),
                     c.ruined ? "FAILED" : "ok");
}

std::string CheckWarning(const CheckResult& c, bool after_auto) {
  const std::string what = ClassMetric(c.metric)
                               ? fmt::format("{} {:.2f} points below FP32", c.metric, c.loss)
                               : fmt::format("relative output MSE {:.3g} (above {:g})", c.output.relative_mse(),
                                             kCheckMaxRelMse);
  const std::string budget = ClassMetric(c.metric) ? "--budget 1" : "--budget 0.01 --metric rel_mse";
  const std::string fixes =
      after_auto
          ? fmt::format("{} (keeps the fewest layers in float that bring INT8 within the budget of FP32)", budget)
          : fmt::format("--method auto (the range method that does best on held-out data) or {} (keeps the "
                        "fewest layers in float that bring INT8 within the budget of FP32)",
                        budget);
  // The relative MSE does not know the task: a model can lose 2 points of its task metric at
  // 0.1 (PP-OCRv4 rec on rendered lines) or half of it at 0.06 (on random text). So the warning
  // says "may be ruined" and asks for the task metric; the class-output verdict is direct.
  return fmt::format("INT8 CHECK FAILED: {} on the check samples (SQNR {:.1f} dB); the INT8 model may be ruined: "
                     "measure it on your task before deploying model.qdq.onnx, or try {}",
                     what, c.output.sqnr_db(), fixes);
}

}  // namespace quantkit::pipelines
