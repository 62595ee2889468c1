// Rewrites  op(x)  ->  op(DequantizeLinear(QuantizeLinear(x, s, 0), s, 0))  at every placement
// site (passes/qdq_placement.h) whose tensor the plan quantizes, for TensorRT explicit
// quantization: symmetric int8, zero-point 0 (int8 initializer), per-channel weights with `axis`
// written explicitly (TensorRT's parser defaults a missing axis to 0, ONNX to 1), float weights
// kept behind Q -> DQ. A tensor read by several sites gets one shared Q/DQ pair; consumers that
// are not sites keep reading the float tensor. Graph outputs are never rewired.
// Sites inside If/Loop/Scan bodies get their pair inside that body (one per body and tensor; a
// captured tensor is quantized where the body reads it), keyed by the site's qualified name.
//
// Requires the default-domain opset >= 13 (per-axis Q/DQ); fails before mutating otherwise.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr int64_t kMinQdqOpset = 13;

struct InsertQdqReport {
  int activation_pairs = 0;
  int weight_pairs = 0;
  std::vector<std::string> skipped;  // "tensor: reason" for sites left in float
};

Result<InsertQdqReport> InsertQdq(ir::Model& model, const quant::QuantPlan& plan,
                                  const std::vector<QdqSite>& sites);

// Fills the plan's weight entries for the weight sites from the initializers
// (max|w|/127 per channel), leaving entries already present untouched.
Status AddWeightScales(const ir::Graph& graph, const std::vector<QdqSite>& sites,
                       quant::QuantPlan* plan);

}  // namespace quantkit::passes
