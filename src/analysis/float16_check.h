// Which float layers lose accuracy in FP16 (or BF16), and so stay FP32 in a strongly typed
// model: `analyze`'s per-layer question, asked of the float dtype instead of INT8.
//
// Given a model (the FP32 model, or the simulation model of a plan: its float layers are what a
// TensorRT 11 engine runs in FP16), the evaluator's data and a 16-bit float dtype:
//   statistics  one run of the model with collectors on every candidate's float outputs: the
//               range check of quant/float_range.h (amax beyond the type's max with a margin,
//               NaN/Inf, values float16 makes subnormal), plus the same check of every float
//               initializer the node reads;
//   isolated    per candidate, one run with only that node in the 16-bit type: Cast to the type
//               on its float inputs and back to float32 on its float outputs, so the interpreter
//               computes it as TensorRT computes a 16-bit layer (runtime/float_precision.h: 16-bit
//               inputs and weights, FP32 arithmetic, the output rounded once); the error at the
//               model output (SQNR, cosine, relative MSE vs the evaluator's FP32 reference) and
//               the metrics;
//   all         one run with every candidate in the 16-bit type: the all-FP16 figure.
// A node is pinned to FP32 when its range check fails, or when its isolated run costs more than
// max_output_rel_mse at the output or more than max_metric_loss on any metric (Metric::Loss,
// points for shares). Candidates: nodes with a float output that compute (Q/DQ, Cast, shape and
// pure data-movement ops are skipped: they are exact in any float type), or `nodes` when given
// (each must name a node: a name that matches nothing is an error). Float inputs and outputs are
// found by ir::InferShapes types (and initializers'); a node whose float outputs cannot be typed
// is reported with "untyped" and not tried.
//
// Cost: 1 + N + 1 runs of the model over the evaluator's samples (N candidates). Results are the
// same in one process and under a launch (the evaluator's per-batch combination).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/layer_analysis.h"
#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "ir/graph.h"
#include "quant/float_range.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

inline constexpr double kDefaultFloat16MaxOutputRelMse = 1e-4;
inline constexpr double kDefaultFloat16MaxMetricLoss = 0.1;  // points for shares (top1 x100)

struct Float16CheckOptions {
  quant::FloatRangeOptions range;  // range.dtype: float16 or bfloat16
  double max_output_rel_mse = kDefaultFloat16MaxOutputRelMse;
  double max_metric_loss = kDefaultFloat16MaxMetricLoss;
  std::vector<std::string> nodes;  // empty: every candidate
  bool progress = true;
};
// kInvalidArgument naming the bad field.
Status CheckFloat16CheckOptions(const Float16CheckOptions& options);

struct Float16LayerRow {
  std::string node;
  std::string op_type;
  std::vector<std::string> outputs;  // its float outputs
  ErrorSummary isolated_output;
  std::map<std::string, double> isolated_metrics;
  double worst_metric_loss = 0;          // max over metrics of Metric::Loss vs FP32
  quant::FloatRangeCheck range;          // worst of its outputs and float initializers
  std::string range_tensor;              // the tensor `range` is about
  bool tried = false;                    // false: untyped, not run
  bool pin = false;                      // keep in FP32
  std::string reason;                    // why pinned, or why not tried
};

struct Float16CheckResult {
  std::vector<Float16LayerRow> rows;      // pinned first, then by isolated output error, worst first
  std::vector<std::string> pin_to_fp32;   // node names, in graph order
  ErrorSummary all_output;                // every candidate in the 16-bit type
  std::map<std::string, double> reference_metrics, all_metrics;
  int trials = 0;
  double seconds = 0;
};

// `model` must have the evaluator's inputs (e.g. analysis::BuildSimulationModel of a plan, or the
// evaluator's float model).
Result<Float16CheckResult> CheckFloat16Layers(const PlanEvaluator& evaluator, const ir::Model& model,
                                              const std::vector<Metric*>& metrics,
                                              const Float16CheckOptions& options);

std::string FormatFloat16CheckTable(const Float16CheckResult& result, size_t max_rows);
std::string Float16CheckJson(const Float16CheckResult& result);

}  // namespace quantkit::analysis
