#include "pipelines/calibrate_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/plan_eval.h"
#include "common/check.h"
#include "pipelines/holdout.h"

namespace quantkit::pipelines {

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
  eval.simulation.placement = calibrate.placement;
  eval.simulation.mode = analysis::PlacementMode::kTensorRT;
  if (!options.holdout.empty()) {
    eval.data = options.holdout;
    eval.samples = options.holdout_samples;
  } else {
    QK_RETURN_IF_ERROR(HoldOutCalibrationTail(&calibrate, &eval, options.holdout_samples));
  }
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
  fallback.weight_storage = calibrate.weight_storage;  // the float dtype travels in the plan
  Result<FallbackResult> searched =
      RunFallback(*evaluator, r.calibration.plan, metric.get(), fallback);
  if (!searched.ok()) {
    return searched.status().WithContext(
        fmt::format("the calibration artifacts in {} are written, not repaired; the fallback "
                    "search on {} failed",
                    calibrate.output_dir, r.holdout));
  }
  r.fallback = std::move(*searched);
  return r;
}

std::string FormatCalibrateBudget(const CalibrateBudgetResult& r) {
  std::string s = r.calibration.summary;
  s += fmt::format("budget: fallback search on held-out {}\n", r.holdout);
  s += FormatFallback(r.fallback);
  return s;
}

}  // namespace quantkit::pipelines
