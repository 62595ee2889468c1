// `quantkit analyze`: which quantized tensor costs accuracy, and how much.
//
// For every tensor the plan quantizes (activations and weights, in topological order of their
// first quantized consumer):
//   isolated     only this tensor fake-quantized: the error at the tensor (its own quantization
//                of the FP32 values) and at the model output;
//   accumulated  this tensor and every quantized tensor before it (topological order) fake-
//                quantized: the error at the tensor (what its consumers read, vs FP32) and at the
//                output;
// each as SQNR (dB), cosine and relative MSE against FP32; plus the saturation rate (share of
// values clipped to [-128, 127]) and the share of the range used (max|x| / amax) on FP32 values.
// Rows are ranked by the isolated output error (relative MSE), worst first, and name the ONNX
// nodes that read the quantized tensor. Costs 2 simulated runs per tensor over the samples (plus
// one FP32 run to capture activations); FP32 outputs are reused from the evaluator.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

struct ErrorSummary {
  double sqnr_db = 0, cosine = 0, rel_mse = 0;
  static ErrorSummary From(const ErrorStats& s) {
    return {s.sqnr_db(), s.cosine(), s.relative_mse()};
  }
};

struct LayerRow {
  int order = 0;  // topological position
  std::string tensor;
  std::string role;                // "activation" / "weight"
  std::vector<std::string> nodes;  // ONNX nodes reading the quantized tensor
  double amax = 0;                 // per tensor; max over channels for weights
  ErrorSummary isolated_tensor, isolated_output, accumulated_tensor, accumulated_output;
  std::map<std::string, double> isolated_metrics, accumulated_metrics;
  double saturation = 0;  // share of values clipped
  double range_used = 0;  // max|x| / amax (> 1 when clipping)
};

struct AnalyzeResult {
  std::vector<LayerRow> rows;  // ranked, worst first
  std::map<std::string, double> fp32_metrics, int8_metrics;
  ErrorSummary int8_output;  // the whole plan
  int64_t samples = 0;
  int trials = 0;
  double seconds = 0;
  double fp32_seconds = 0;  // one FP32 pass, for comparison
};

struct AnalyzeOptions {
  bool accumulated = true;  // the prefix runs (half the cost)
  bool progress = true;
};

Result<AnalyzeResult> AnalyzeLayers(const PlanEvaluator& evaluator, const quant::QuantPlan& plan,
                                    const std::vector<Metric*>& metrics,
                                    const AnalyzeOptions& options);

std::string FormatAnalyzeTable(const AnalyzeResult& result, size_t max_rows);
std::string AnalyzeJson(const AnalyzeResult& result);

}  // namespace quantkit::analysis
