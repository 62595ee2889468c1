// Rewrites every per-tensor activation pair of a simulation
//     DequantizeLinear(QuantizeLinear(x, s, z), s, z)  ->  com.quantkit::FakeQuantizeLinear(x, s,
//     z)
// so that a simulated run fake-quantizes each activation in one pass over memory, in place when
// x is not read again (runtime/ops/quant.cc), instead of writing an 8-bit tensor and reading it
// back: the two passes cost more than a depthwise convolution on mobilenet_v2 / efficientnet_b0.
// The values are the same bits (the kernel composes the two nodes' float operations), and the
// output keeps DequantizeLinear's name, so observers of float tensors see what they saw.
//
// Fused only where the quantized tensor is private to the pair (one reader, not a graph output),
// scale (float32, float16 or bfloat16: the output keeps DequantizeLinear's type, computed as the
// interpreter computes 16-bit types, runtime/float_precision.h) and zero point are the same
// scalar constants on both nodes, and no attribute but axis is
// set; anything else (per-channel, blocked, 16-bit, output_dtype) stays two nodes. Run it after
// FoldWeightQdq: constant inputs are left alone (weights fold once instead).
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr const char* kSimulationDomain = "com.quantkit";

// Counts "activation_pairs" (fused).
class FuseActivationQdq final : public Pass {
 public:
  const char* Name() const override { return "fuse_activation_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
