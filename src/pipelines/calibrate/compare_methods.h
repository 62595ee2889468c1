// `quantkit calibrate --compare-methods` and `--method auto`: what users do by hand today —
// calibrate with every method, evaluate each plan on held-out data, keep the best.
//
// One load and hash of the model and one statistics pass (PrepareCalibration: the collectors keep
// histograms, so BuildPlan gives any method without re-running the model), one plan per
// method, each simulated (analysis/simulate.h) on the holdout split against cached FP32 outputs.
// The best method (lowest loss of the metric vs FP32; ties: lowest output relative MSE) gets its
// artifacts written to the output directory, as a plain `calibrate` with that method would.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipelines/calibrate/auto_method.h"
#include "pipelines/calibrate/calibrate.h"
#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct CompareMethodsOptions {
  CalibrateOptions calibrate;                 // data, placement, output_dir...; method is ignored
  std::vector<quant::MethodRequest> methods;  // empty: max, entropy, percentile:99.99, mse
  // Empty: the last quarter of the calibration data, which calibration then leaves out
  // (pipelines/calibrate/holdout.h). The CLI defaults it to fashion-mnist:val for fashion-mnist
  // data.
  std::string holdout;
  int64_t holdout_samples = 0;
  std::string metric;  // empty: top1 with labels, else agreement
  // --method auto: after the per-model choice, the greedy per-tensor pass of
  // pipelines/calibrate/auto_method.h (at most kAutoMaxTensorTrials more held-out evaluations).
  // With calibrate.ptq.stages, auto then tries each stage alone and all of them in order on the
  // chosen plan (each costs its stage run plus one held-out simulation) and keeps the best, or
  // none.
  bool per_tensor = false;
};

// One PTQ candidate --method auto tried.
struct PtqTrial {
  std::string stages;  // "seqmse,adaround"; "" for the plan without stages
  double loss = 0, rel_mse = 0, seconds = 0;
};

struct MethodScore {
  std::string method;
  double value = 0, loss = 0, rel_mse = 0, sqnr_db = 0, agreement = 0;
};

struct CompareMethodsResult {
  std::string metric, holdout;  // holdout: the evaluator's description of the data used
  double fp32_value = 0;
  std::vector<MethodScore> scores;  // in the order tried
  std::string best;
  // per_tensor: the tensors whose method the greedy pass changed, and what it cost.
  std::vector<TensorMethodChange> tensor_changes;
  int tensor_trials = 0, tensor_candidates = 0;
  double tensor_loss = 0,
         tensor_rel_mse = 0;               // the score after the per-tensor pass (before stages)
  double best_loss = 0, best_rel_mse = 0;  // of the plan written (per-tensor changes included)
  std::vector<PtqTrial> ptq_trials;  // --method auto with --ptq: each candidate, in the order tried
  std::string ptq_best;              // the stages kept ("" : none helped)
  CalibrateResult best_result;       // the artifacts of the best method
  double seconds = 0;
};

Result<CompareMethodsResult> CompareMethods(const CompareMethodsOptions& options);

// The per-model choice among `methods` over one prepared calibration (each plan BuildPlan over
// its statistics, judged by `metric` on `evaluator` against FP32's `fp32_value`; `asked`'s
// overrides kept), then with `per_tensor` the greedy per-tensor pass (auto_method.h).
// --compare-methods, --method auto and the repair ladder's auto rung.
struct MethodSearch {
  std::vector<MethodScore> scores;  // in the order of `methods`
  size_t best = 0;
  MethodChoice choice;         // the best method with the overrides kept
  PlanScore method_score;      // of the best method before the per-tensor pass
  PlanScore score;             // of `choice`
  PerTensorChoice per_tensor;  // trials 0 without per_tensor
  bool stopped = false;        // out_of_time cut the search (methods or tensors left untried)
};
// `out_of_time`, when given, is asked after each method's plan and before each per-tensor trial:
// true ends the search with the best found so far (the repair ladder's time cap).
Result<MethodSearch> SearchMethods(const PreparedCalibration& prepared,
                                   const analysis::PlanEvaluator& evaluator,
                                   analysis::Metric* metric, double fp32_value,
                                   const std::vector<quant::MethodRequest>& methods,
                                   const MethodChoice& asked, bool per_tensor,
                                   const std::function<bool()>& out_of_time = {});
std::string FormatCompareMethods(const CompareMethodsResult& r);
std::string CompareMethodsJson(const CompareMethodsResult& r);

}  // namespace quantkit::pipelines
