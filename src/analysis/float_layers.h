// `quantkit analyze --layers float`: which tensor of the FP16 (BF16) float part costs accuracy,
// and the --keep-fp32 nodes that remove that cost.
//
// A plan written with --float-dtype fp16|bf16 stores every non-quantized tensor in that dtype,
// except the FP32 islands the writer decided (passes/float_precision.h). The simulation computes
// such a model as TensorRT 11 does: each op in FP32 with its outputs rounded to the dtype
// (runtime/float_precision.h). The FP16 error is therefore made where a tensor is stored, and it
// goes away only when the tensor's producer *and* its consumers compute in FP32 (pinning the
// producer alone writes FP32 that a Cast rounds again before an FP16 consumer). So the unit of the
// check is the tensor: for each low-precision tensor the plan runs once with that tensor kept in
// FP32 (FloatPrecision::fp32_tensors: its producer and consumers in FP32), and the row says how
// much of the output error against the FP32 model goes away (the tensor's *recovery*):
//
//   whole plan        the plan as written (INT8 + FP16) and the same plan with FP32 float parts;
//                     the difference is the FP16 cost (0 or below: FP16 costs nothing measurable);
//   per tensor        recovery = rel MSE(plan) - rel MSE(tensor kept in FP32), ranked;
//   recommendation    when the FP16 cost is at least kFloatCostShare of the INT8-only error, the
//                     tensors with the largest recovery (each at least kMinNodeRecoveryShare of the
//                     cost) until kTargetRecoveryShare of the cost is recovered, if together they
//                     recover at least kMinRecommendedShare (else the cost is spread over the
//                     graph); their producers and consumers are the `--keep-fp32` list, verified by
//                     one more run with them pinned.
//
// Skipped (counted): outputs of nodes exact in the dtype once their inputs are (data movement,
// Relu, MaxPool, Max/Min...: keeping them FP32 changes no value), Q/DQ and Cast nodes, and
// tensors whose producer or a consumer has no name (--keep-fp32 cannot name it). Costs one
// simulated run per candidate tensor plus three; trials start from the cached prefix they share
// with the plan (prefix_cache.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/layer_analysis.h"
#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

// The FP16 cost is worth acting on when it adds this share of the INT8-only output error.
inline constexpr double kFloatCostShare = 0.10;
// A node is recommended when pinning it recovers at least this share of the FP16 cost...
inline constexpr double kMinNodeRecoveryShare = 0.05;
// ...and recommendations stop once this share of the cost is recovered.
inline constexpr double kTargetRecoveryShare = 0.80;
// Recommended only when the tensors chosen recover at least this share together (fewer FP32
// islands that leave most of the cost in place are not worth their Casts).
inline constexpr double kMinRecommendedShare = 0.50;

struct FloatLayerRow {
  std::string tensor;              // a low-precision tensor of the written model
  std::string op_type;             // its producer's
  std::vector<std::string> nodes;  // its producer and float consumers: the --keep-fp32 names
  ErrorSummary output;             // the plan with this tensor kept in FP32
  double recovery = 0;             // rel MSE(plan) - rel MSE(kept); > 0 helps
  std::map<std::string, double> metrics;
};

struct FloatLayersResult {
  std::string dtype;               // "fp16" | "bf16"
  ErrorSummary plan_output;        // as written
  ErrorSummary fp32_float_output;  // the same plan with FP32 float parts (INT8 error only)
  std::map<std::string, double> plan_metrics, fp32_float_metrics;
  double cost = 0;                        // plan_output.rel_mse - fp32_float_output.rel_mse
  std::vector<FloatLayerRow> rows;        // ranked, largest recovery first
  std::vector<std::string> keep_fp32;     // recommended --keep-fp32 nodes (empty: none needed)
  std::vector<std::string> keep_tensors;  // the tensors they keep in FP32
  ErrorSummary recommended_output;        // the plan with keep_fp32 pinned (when not empty)
  std::map<std::string, double> recommended_metrics;
  int64_t skipped_exact = 0;    // nodes exact in the dtype
  int64_t skipped_unnamed = 0;  // tensors a --keep-fp32 list cannot reach (an unnamed node)
  int64_t already_fp32 = 0;     // nodes the written model computes in FP32
  int64_t samples = 0;
  int trials = 0;
  double seconds = 0;
};

struct FloatLayersOptions {
  bool progress = true;
  int64_t cache_bytes = 0;  // prefix cache budget (0: kDefaultPrefixCacheBytes)
};

// kInvalidArgument when the plan's float dtype is FP32 (nothing to check).
Result<FloatLayersResult> AnalyzeFloatLayers(const PlanEvaluator& evaluator,
                                             const quant::QuantPlan& plan,
                                             const std::vector<Metric*>& metrics,
                                             const FloatLayersOptions& options);

std::string FormatFloatLayersTable(const FloatLayersResult& result, size_t max_rows);
// One JSON object (rows ranked as in the table).
std::string FloatLayersJson(const FloatLayersResult& result);

// analyze's whole report from what ran (either may be null, not both): the INT8 table, then the
// float part's; JSON is AnalyzeJson's object with the float part under "float_layers" (only that
// key without the INT8 analysis). `max_rows` 0: every row.
std::string FormatAnalyzeReport(const AnalyzeResult* int8, const FloatLayersResult* floats,
                                size_t max_rows);
std::string AnalyzeReportJson(const AnalyzeResult* int8, const FloatLayersResult* floats);

}  // namespace quantkit::analysis
