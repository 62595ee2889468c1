// Rewrites the constant weights of a simulation into the values their Q/DQ nodes compute:
//
//   DequantizeLinear(QuantizeLinear(W, s, z), s, z)  ->  W'  (W a float / float16 / bfloat16
//                                                              constant: fake quantization)
//   DequantizeLinear(W_q, s, z)                       ->  W'  (W_q a constant int8 / uint8:
//                                                              INT8 weight storage)
//
// W' is one initializer with (q - z) * s computed in float32, the operations the two nodes do
// (quant::QuantizeValue / quant::Dequantize). Its type is the DequantizeLinear's output type (the
// scale's: float32, float16 or bfloat16, rounded once to nearest even), except where TensorRT
// fuses the DequantizeLinear into INT8 layers (runtime/trt_fusions.h): there W' keeps the exact
// float32 product, as the interpreter does for the unfolded node. A simulation folds its weights
// once at setup, so a run pays only for activation fake quantization (analysis/simulate.h).
// Pairs with different scale, zero point or axis, blocked Q/DQ and DequantizeLinear outputs that
// are graph outputs are left alone.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "folded" (weight pairs and dequantized INT8 weights).
class FoldWeightQdq final : public Pass {
 public:
  const char* Name() const override { return "fold_weight_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
