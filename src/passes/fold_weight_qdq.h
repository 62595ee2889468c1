// Rewrites  DequantizeLinear(QuantizeLinear(W, s, z), s, z)  ->  W'  when W is a constant,
// where W' is one initializer holding the fake-quantized weights (float32 math of
// quant::QuantizeValue / quant::Dequantize, as the two nodes compute). A simulation folds its
// weight pairs once at setup, so a run pays only for activation fake quantization
// (analysis/simulate.h). Pairs with different scale, zero point or axis, blocked pairs and pairs
// whose output is a graph output are left alone.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "folded" (weight pairs).
class FoldWeightQdq final : public Pass {
 public:
  const char* Name() const override { return "fold_weight_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
