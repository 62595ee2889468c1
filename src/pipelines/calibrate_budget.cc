#include "pipelines/calibrate_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/plan_eval.h"
#include "common/check.h"
#include "pipelines/holdout.h"

namespace quantkit::pipelines {
namespace {

std::string BudgetLine(const FallbackResult& f, double budget, const std::string& holdout) {
  return fmt::format("budget: {} {} of FP32 on held-out {}: {} ({} layer(s) kept in float, loss {:.4g})\n",
                     f.metric, budget, holdout, f.search.within_budget ? "within budget" : "NOT within budget",
                     f.search.float_layers.size(), f.search.loss);
}

CheckResult FinalCheck(const FallbackResult& f, int64_t samples, const std::string& holdout) {
  return CheckFromEvaluation(f.metric, f.fp32_value, f.final_value, f.final_output, samples, holdout);
}

}  // namespace

Result<CalibrateBudgetResult> CalibrateWithinBudget(const CalibrateBudgetOptions& options) {
  QK_RETURN_IF_NOT(!options.calibrate.output_dir.empty(), StatusCode::kInvalidArgument,
                   "--budget writes the repaired artifacts: give -o DIR");
  QK_RETURN_IF_NOT(options.budget >= 0, StatusCode::kInvalidArgument,
                   "--budget must be >= 0, got {}", options.budget);
  CalibrateBudgetResult r;
  CalibrateOptions calibrate = options.calibrate;
  analysis::PlanEvalOptions eval;
  eval.model = calibrate.model;
  eval.batch_size = calibrate.batch_size;
  eval.image = calibrate.image;
  eval.simulation.placement = calibrate.placement;
  eval.simulation.mode = analysis::PlacementMode::kTensorRT;
  if (!options.holdout.empty()) {
    eval.data = options.holdout;
    eval.samples = options.holdout_samples;
  } else {
    QK_RETURN_IF_ERROR(HoldOutCalibrationTail(&calibrate, &eval, options.holdout_samples));
  }
  // The check of what is finally written is the search's own last trial on the held-out data,
  // stated in the summary the search writes; no pass over a slice of --data.
  calibrate.check.samples = 0;
  QK_ASSIGN_OR_RETURN(r.calibration, Calibrate(calibrate));

  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::PlanEvaluator> evaluator,
                      analysis::PlanEvaluator::Create(eval));
  r.holdout = evaluator->data_description();
  const std::string name =
      !options.metric.empty()
          ? options.metric
          : analysis::DefaultMetricName(evaluator->has_labels(), evaluator->class_output());
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(name));
  FallbackOptions fallback;
  fallback.budget = options.budget;
  fallback.max_float_layers = options.max_float_layers;
  fallback.float_precision = options.float_precision;
  fallback.output_dir = calibrate.output_dir;
  const int64_t held_out_samples = evaluator->num_samples();
  // summary.txt of the final plan: its float layers, and its check on the held-out data.
  fallback.summary = [&](const FallbackResult& f) {
    CalibrateResult final_state = r.calibration;
    final_state.plan = f.plan;
    final_state.check = FinalCheck(f, held_out_samples, r.holdout);
    if (final_state.check.ruined) {
      final_state.warnings.push_back(CheckWarning(final_state.check, /*after_auto=*/false));
    }
    const QdqPairCounts pairs{f.activation_pairs, f.weight_pairs};
    return SummarizeCalibration(calibrate, final_state, &pairs) + BudgetLine(f, options.budget, r.holdout);
  };
  Result<FallbackResult> searched =
      RunFallback(*evaluator, r.calibration.plan, metric.get(), fallback);
  if (!searched.ok()) {
    return searched.status().WithContext(
        fmt::format("the calibration artifacts in {} are written, not repaired; the fallback "
                    "search on {} failed",
                    calibrate.output_dir, r.holdout));
  }
  r.fallback = std::move(*searched);
  r.calibration.summary = fallback.summary(r.fallback);
  r.calibration.check = FinalCheck(r.fallback, held_out_samples, r.holdout);
  return r;
}

std::string FormatCalibrateBudget(const CalibrateBudgetResult& r) {
  // The summary of the final plan (summary.txt), then the search's report.
  return r.calibration.summary + "fallback search:\n" + FormatFallback(r.fallback);
}

}  // namespace quantkit::pipelines
