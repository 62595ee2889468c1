// Rewrites  op(x)  ->  op(DequantizeLinear(QuantizeLinear(x, s, 0), s, 0))  at every placement
// site (passes/qdq_placement.h) whose tensor the plan quantizes, for TensorRT explicit
// quantization: symmetric int8, zero-point 0 (int8 initializer), per-channel weights with `axis`
// written explicitly (TensorRT's parser defaults a missing axis to 0, ONNX to 1), float weights
// stored as INT8 initializers behind a DequantizeLinear (WeightStorage::kInt8, what the writers of
// model files use: ModelOpt's dq_only, a quarter of the float bytes; TensorRT and onnxruntime read
// it) or kept in float behind Q -> DQ (kFakeQuant: what simulation and QAT run). With kInt8 the
// DequantizeLinear's output takes the weight's own name when nothing else reads the float weight,
// so extracting the plan back (passes/extract_qdq.h) and stripping the Q/DQ (passes/strip_qdq.h)
// give the weight its name again; a weight captured by an If/Loop/Scan body keeps Q -> DQ. A tensor
// read by several sites gets one shared Q/DQ pair; consumers that are not sites keep reading the
// float tensor. Graph outputs are never rewired. Sites inside If/Loop/Scan bodies get their pair
// inside that body (one per body and tensor; a captured tensor is quantized where the body reads
// it), keyed by the site's qualified name.
//
// Requires the default-domain opset >= 13 (per-axis Q/DQ); fails before mutating otherwise.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr int64_t kMinQdqOpset = 13;

// How quantized weights are written.
enum class WeightStorage {
  kInt8,       // W_int8 -> DequantizeLinear(s, 0): the stored values are the quantized ones
  kFakeQuant,  // W_float -> QuantizeLinear(s, 0) -> DequantizeLinear(s, 0)
};

// "int8" | "float" (the CLI's --weight-storage).
Result<WeightStorage> ParseWeightStorage(const std::string& text);

// Counts "activation_pairs" and "weight_pairs"; lists "skipped" ("tensor: reason" for sites left
// in float). `plan` and `sites` (found on the model Run rewrites) must outlive the pass.
class InsertQdq final : public Pass {
 public:
  InsertQdq(const quant::QuantPlan& plan, const std::vector<QdqSite>& sites,
            WeightStorage weights = WeightStorage::kFakeQuant)
      : plan_(plan), sites_(sites), weights_(weights) {}
  const char* Name() const override { return "insert_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;

 private:
  const quant::QuantPlan& plan_;
  const std::vector<QdqSite>& sites_;
  WeightStorage weights_;
};

// Fills the plan's weight entries for the weight sites from the initializers
// (max|w|/127 per channel), leaving entries already present untouched.
Status AddWeightScales(const ir::Graph& graph, const std::vector<QdqSite>& sites,
                       quant::QuantPlan* plan);

}  // namespace quantkit::passes
