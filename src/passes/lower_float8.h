// Lowers an FP8 (E4M3FN) Q/DQ model to what the interpreter runs, which has no FP8 dtype (ATen
// 1.13), with the values onnxruntime computes:
//
//   DequantizeLinear(QuantizeLinear(x, s1, z), s2, z)   z float8e4m3fn
//       ->  com.quantkit::FakeQuantizeE4M3(x, s1, s2)    decode(encode(x / s1)) * s2
//   DequantizeLinear(W, s, z)   W a float8e4m3fn initializer (a stored FP8 weight)
//       ->  the initializer decode(W) * s, in the scale's dtype
//
// per tensor or per axis (`axis`; both nodes of a pair on the same axis), encode/decode as in
// ir/float8.h (round to nearest even, saturation to +-448). The FP8 models of NVIDIA's ModelOpt
// (`--quantize_mode fp8`) are made of exactly these. Any other FP8 value (a graph input or output,
// a QuantizeLinear read by another node, a Cast to FP8, a blocked scale, another FP8 type, a zero
// point other than 0) is kUnsupported, naming the node.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Whether any value of the main graph is of an FP8 type.
bool HasFloat8(const ir::Model& model);

struct Float8Lowering {
  int64_t pairs = 0;    // Q -> DQ pairs fused into FakeQuantizeE4M3
  int64_t weights = 0;  // FP8 initializers dequantized into float ones
};

Result<Float8Lowering> LowerFloat8ForSimulation(ir::Model& model);

}  // namespace quantkit::passes
