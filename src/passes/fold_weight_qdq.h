// Rewrites  DequantizeLinear(QuantizeLinear(W, s, z), s, z)  ->  W'  when W is a constant,
// where W' is one initializer holding the fake-quantized weights (float32 math of
// quant::QuantizeValue / quant::Dequantize, as the two nodes compute). A simulation folds its
// weight pairs once at setup, so a run pays only for activation fake quantization
// (analysis/simulate.h). Pairs with different scale, zero point or axis, blocked pairs and pairs
// whose output is a graph output are left alone.
#pragma once

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Returns the number of pairs folded.
Result<int> FoldWeightQdq(ir::Model& model);

}  // namespace quantkit::passes
