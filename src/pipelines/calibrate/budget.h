// `quantkit calibrate --budget B`: calibration, then the fallback search
// (pipelines/evaluate/fallback.h) on held-out data in the same command, so a model that INT8 ruins
// (an audio front-end's power spectrum under symmetric int8) comes out repaired without a second
// command.
//
// Held-out data: `holdout` when given (calibration then uses all of --data); otherwise the last
// quarter of the calibration data (at least one sample), and calibration uses the rest, so the
// search never judges a plan on the samples it was calibrated on. Without labels the budget is
// on the output-aware metric vs FP32 (analysis::DefaultMetricName): agreement points on a class
// vector, relative output MSE otherwise.
//
// Artifacts in output_dir, one set (common/artifact_set.h) locked before the long passes:
// calibrate's files (calib.cache, ranges.txt, summary.txt, plan.json, model.qdq.onnx) are staged,
// the fallback's then replace plan.json and model.qdq.onnx with the repaired plan
// (plan.float_nodes, each with its reason) and its Q/DQ model and add layer_precisions.txt and
// fallback.json; the set is committed whole. The held-out data is checked before the calibration
// pass. Any failure (bad --holdout, a failed search) leaves output_dir as it was.
#pragma once

#include <string>
#include <vector>

#include "pipelines/calibrate/calibrate.h"
#include "pipelines/evaluate/fallback.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct CalibrateBudgetOptions {
  CalibrateOptions calibrate;  // output_dir required
  double budget = 0.5;         // fallback units: points for top1/agreement, a ratio for rel_mse
  std::string holdout;         // empty: the tail of the calibration data
  int64_t holdout_samples = 0;
  std::string metric;  // empty: analysis::DefaultMetricName
  int max_float_layers = 0;
  std::string float_precision = "fp16";
};

struct CalibrateBudgetResult {
  CalibrateResult calibration;
  FallbackResult fallback;
  std::string holdout;  // what the search was judged on
};

Result<CalibrateBudgetResult> CalibrateWithinBudget(const CalibrateBudgetOptions& options);

// The calibration summary, then the search's report, the layers the plan written keeps in float
// and its accuracy check (also summary.txt, without the "wrote" lines).
std::string FormatCalibrateBudget(const CalibrateBudgetResult& r, bool with_written = true);

}  // namespace quantkit::pipelines
