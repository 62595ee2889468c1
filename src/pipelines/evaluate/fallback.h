// `quantkit fallback`: the smallest set of layers to keep in float so that the INT8 simulation of
// a plan comes within a budget of FP32 (pipelines/evaluate/fallback_search.h on real trials).
//
// Candidates are the nodes that read a quantized tensor (what TensorRT can keep in higher
// precision). A trial keeps a set of nodes in float (plan.float_nodes -> their Q/DQ sites are not
// inserted) and runs the simulation over the evaluator's cached data, against cached FP32
// outputs. The loss is the metric's Loss() against FP32: top-1 points with labels, agreement
// points (100 x share of changed argmaxes) or relative output MSE without.
//
// Outputs (written atomically into output_dir when set):
//   plan.json            the plan with plan.float_nodes (each with its reason)
//   model.qdq.onnx       the Q/DQ model of that plan
//   layer_precisions.txt trtexec --layerPrecisions value (float-kept layers) for TensorRT <= 10's
//                        implicit INT8 (a '#' line says so); TensorRT 11 reads the precisions from
//                        model.qdq.onnx, whose float-kept layers are in the plan's float dtype
//   fallback.json        the search: ranking, every step with its loss and wall time, timings
// Under a distributed launch (an evaluator with a communicator) every rank runs every trial on
// its shard and gets the same losses, so all take the same decisions; rank 0 alone writes.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "analysis/prefix_cache.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "pipelines/evaluate/fallback_search.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit {
class ArtifactSet;
}

namespace quantkit::pipelines {

// The files the fallback writes into output_dir.
inline const std::vector<std::string> kFallbackArtifacts{"model.qdq.onnx", "plan.json",
                                                         "layer_precisions.txt", "fallback.json"};

struct FallbackOptions {
  double budget = 0.5;
  int max_float_layers = 0;
  std::string output_dir;
  std::string float_precision = "fp16";
  // The float part of the written model (and of every trial's simulation); nullopt: the plan's own.
  std::optional<passes::FloatOptions> floats;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;  // of the written model
  bool progress = true;
  // Trials start from cached activations of the part they share with the plan's own simulation
  // (analysis/prefix_cache.h), within this many bytes; 0: every trial runs the whole model.
  // Same results either way.
  int64_t trial_cache_bytes = analysis::kDefaultPrefixCacheBytes;
  // When set (on rank 0), the files are staged into this set, opened on output_dir with
  // kFallbackArtifacts among its names, and the caller commits it (calibrate --budget). Not owned.
  ArtifactSet* artifacts = nullptr;
  // Ends the search early with the best set so far (fallback_search.h); empty: never.
  std::function<bool()> out_of_time;
};

struct FallbackResult {
  FallbackSearchResult search;
  quant::QuantPlan plan;  // with float_nodes
  std::string metric;
  double fp32_value = 0, int8_value = 0, final_value = 0;
  double full_eval_seconds = 0;  // one FP32 pass over the data (not repeated by trials)
  double trial_seconds = 0;      // mean wall time of a trial
  double simulated_seconds = 0;  // one whole simulated pass of the plan (building the trial cache)
  int cache_checkpoints = 0;     // checkpoints the trial cache holds (0: trials run whole models)
  int64_t cache_bytes = 0;
  std::string layer_precisions;
  std::vector<std::string> written;
};

// Candidate layers of a plan: named nodes reading a quantized tensor, topological order.
Result<std::vector<std::string>> FallbackCandidates(const analysis::PlanEvaluator& evaluator,
                                                    const quant::QuantPlan& plan);

Result<FallbackResult> RunFallback(const analysis::PlanEvaluator& evaluator,
                                   const quant::QuantPlan& plan, analysis::Metric* metric,
                                   const FallbackOptions& options);

// layer_precisions.txt's text for a --layerPrecisions value.
std::string LayerPrecisionsFile(const std::string& layer_precisions);

// `with_written`: the "wrote FILE" lines at the end.
std::string FormatFallback(const FallbackResult& r, bool with_written = true);
std::string FallbackJson(const FallbackResult& r);

}  // namespace quantkit::pipelines
