// `quantkit calibrate` whole, and the public Calibrate: which of the three calibration workflows
// a request asks for, run, and reported.
//
//   a method (max | entropy | percentile[:P] | mse)  pipelines/calibrate.h      Calibrate
//   --compare-methods, --method auto                 pipelines/compare_methods.h CompareMethods
//   --budget B                                       pipelines/calibrate_budget.h
//   CalibrateWithinBudget
//
// Method names and per-tensor overrides ("TENSOR=METHOD", "OPTYPE=METHOD") are parsed here, once.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "distributed/launch.h"
#include "pipelines/calibrate.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct CalibrationRequest {
  // Everything but the method: model, data, placement, output directory, cache header, ...
  CalibrateOptions calibrate;
  // max | entropy | percentile[:P] | mse, or auto (every method from one statistics pass, the
  // best on held-out data, then refined per tensor).
  std::string method = "max";
  std::vector<std::string> overrides;  // "NAME=METHOD": a tensor or the op type of its consumer
  // Evaluate every method on held-out data and keep the best (the per-model table).
  bool compare_methods = false;
  // Then keep the fewest layers in float that bring INT8 within this of FP32 (the fallback search
  // on held-out data; top1/agreement in points, rel_mse as a ratio).
  std::optional<double> budget;
  // Held-out data for compare/auto (default fashion-mnist:val for fashion-mnist data, else the
  // last quarter of the data) and the budget (default: the last quarter of the data, which
  // calibration then leaves out).
  std::string holdout;
  int64_t holdout_samples = 0;
  std::string metric;  // top1 | agreement | rel_mse; empty: the data's and output's default
};

struct CalibrationRun {
  CalibrateResult result;     // the calibration written (the best method's; before the repair)
  std::string text;           // what `quantkit calibrate` prints (rank 0)
  std::string json;           // --compare-methods: the table; else empty
  bool within_budget = true;  // --budget: the search reached it
  std::vector<std::string> written;               // every file written, once
  std::optional<quant::QuantPlan> repaired_plan;  // --budget: the plan with its float layers
  distributed::RankReport rank;
};

// "NAME=METHOD" -> (NAME, method); kInvalidArgument naming the text otherwise.
Status AddMethodOverride(const std::string& spec,
                         std::map<std::string, quant::MethodRequest>* overrides);

Result<CalibrationRun> RunCalibration(CalibrationRequest request);

}  // namespace quantkit::pipelines
