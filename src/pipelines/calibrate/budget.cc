#include "pipelines/calibrate/budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "analysis/plan_eval.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "distributed/communicator.h"
#include "pipelines/calibrate/holdout.h"

namespace quantkit::pipelines {

Result<CalibrateBudgetResult> CalibrateWithinBudget(const CalibrateBudgetOptions& options) {
  QK_RETURN_IF_NOT(!options.calibrate.output_dir.empty(), StatusCode::kInvalidArgument,
                   "--budget writes the repaired artifacts: give -o DIR");
  QK_RETURN_IF_NOT(std::isfinite(options.budget) && options.budget >= 0,
                   StatusCode::kInvalidArgument, "--budget must be a finite number >= 0, got {}",
                   options.budget);
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
  // One set for the calibration's files and the repair's (common/artifact_set.h): locked before
  // the long passes, committed when both are staged, so a failure anywhere leaves -o as it was.
  std::unique_ptr<ArtifactSet> out;
  if (distributed::WritesLaunchOutputs()) {
    std::vector<std::string> names = CalibrationArtifactNames(calibrate);
    for (const std::string& f : kFallbackArtifacts) {
      if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
    }
    QK_ASSIGN_OR_RETURN(out, ArtifactSet::Open(calibrate.output_dir, names));
  }
  calibrate.artifacts = out.get();
  // The held-out data is opened (and checked against the model) before the calibration pass: a
  // missing, empty or mismatched --holdout fails at once.
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::PlanEvaluator> evaluator,
                      analysis::PlanEvaluator::Create(eval));
  r.holdout = evaluator->data_description();
  const std::string name =
      !options.metric.empty()
          ? options.metric
          : analysis::DefaultMetricName(evaluator->has_labels(), evaluator->class_output());
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(name));
  // The check judges the repaired plan below, on the search's held-out samples, not this one.
  const CheckOptions check = calibrate.check;
  calibrate.check.samples = 0;
  QK_ASSIGN_OR_RETURN(r.calibration, Calibrate(calibrate));

  FallbackOptions fallback;
  fallback.budget = options.budget;
  fallback.max_float_layers = options.max_float_layers;
  fallback.float_precision = options.float_precision;
  fallback.output_dir = calibrate.output_dir;
  fallback.weight_storage = calibrate.weight_storage;  // the float dtype travels in the plan
  fallback.artifacts = out.get();
  Result<FallbackResult> searched =
      RunFallback(*evaluator, r.calibration.plan, metric.get(), fallback);
  if (!searched.ok()) {
    return searched.status().WithContext(
        fmt::format("nothing was written to {}; the fallback search on {} failed",
                    calibrate.output_dir, r.holdout));
  }
  r.fallback = std::move(*searched);
  if (check.samples != 0) {
    // One more simulation over the cached held-out samples: the figure of the plan written.
    CheckResult& c = r.calibration.check;
    c.origin = options.holdout.empty() ? "held-out" : "held-out (--holdout)";
    c.calibration_seconds = r.calibration.seconds;
    const Status judged =
        JudgePlan(*evaluator, r.fallback.plan,
                  (std::filesystem::path(calibrate.output_dir) / "plan.json").string(),
                  /*own_evaluator=*/false, &c);
    if (!judged.ok()) {
      c.ran = false;
      r.calibration.warnings.push_back("check: no accuracy check of the written model: " +
                                       judged.message());
    } else if (!c.warning.empty()) {
      r.calibration.warnings.push_back(c.warning);
    }
  }
  if (out) {
    // summary.txt: the calibration's, the search's and the check of the plan written.
    QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("summary.txt"),
                                       FormatCalibrateBudget(r, /*with_written=*/false)));
    QK_ASSIGN_OR_RETURN(std::vector<std::string> written, out->Commit());
    // The calibration's files that the repair did not replace; the repair's are in
    // fallback.written.
    r.calibration.written.clear();
    for (const std::string& f : written) {
      const auto& repaired = r.fallback.written;
      if (std::find(repaired.begin(), repaired.end(), f) == repaired.end())
        r.calibration.written.push_back(f);
    }
  }
  return r;
}

std::string FormatCalibrateBudget(const CalibrateBudgetResult& r, bool with_written) {
  std::string s = r.calibration.summary;
  s += fmt::format("budget: fallback search on held-out {}\n", r.holdout);
  s += FormatFallback(r.fallback, with_written);
  // The plan written, in one line: what the calibration summary above (before the search) cannot
  // say.
  const quant::QuantPlan& plan = r.fallback.plan;
  s += fmt::format("final plan: {} layer(s) kept in float", plan.float_nodes.size());
  if (!plan.float_nodes.empty()) {
    s += fmt::format(" ({} in model.qdq.onnx; layer_precisions.txt for TensorRT <= 10):",
                     quant::FloatDTypeName(plan.float_precision.dtype));
    for (const auto& [node, reason] : plan.float_nodes) s += " " + node;
  }
  s += "\n";
  s += FormatCheck(r.calibration.check);
  return s;
}

}  // namespace quantkit::pipelines
