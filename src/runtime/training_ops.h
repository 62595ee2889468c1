// Kernels that exist only in training mode (InterpreterOptions::training), in the private domain
// `com.quantkit.training`. A training graph is a Q/DQ model whose
// DequantizeLinear(QuantizeLinear(x)) pairs were rewritten into one FakeQuantize node
// (passes/fake_quant.h), so that gradients flow.
//
//   FakeQuantize(x, scale?) -> y        attributes: axis (-1: per tensor), lsq (0/1)
//     xs = x / scale                    (division, as ONNX QuantizeLinear; not x * (1/scale))
//     q  = clamp(round_half_to_even(xs), -128, 127)
//     y  = q * scale                    (bit for bit what the exported Q -> DQ pair computes)
//   Without `scale` the scale is recomputed from the current x, per channel along `axis`:
//     scale[c] = float32(max|x[c, ...]|) / 127.0f  (quant::WeightScalesFromAmax; 1.0 when zero).
//   Backward (straight-through estimator): dy/dx = 1 where round(xs) lies in [-128, 127], else 0.
//   With lsq=1 the scale input gets the LSQ gradient (Esser et al. 2020):
//     dy/ds = q - xs inside the range, q (= -128 or 127) outside, times g = 1 / sqrt(n * 127),
//     n = the elements of one sample of x.
#pragma once

#include <string>

#include "runtime/kernel.h"

namespace quantkit::runtime {

inline constexpr const char* kTrainingDomain = "com.quantkit.training";

// The training-mode kernel for (domain, op_type), or nullptr.
KernelFactory FindTrainingKernel(const std::string& domain, const std::string& op_type);

// The fake quantization above as a differentiable ATen function (exposed for tests and for the
// trainer's own use). `scale` undefined: per-channel scales from `x` along `axis` (detached).
at::Tensor FakeQuantizeSymmetricInt8(const at::Tensor& x, const at::Tensor& scale, int64_t axis,
                                     bool lsq);

// float32(max|x|)/127 per channel along `axis` (-1: one scale), 1.0 for all-zero channels.
at::Tensor WeightScalesFrom(const at::Tensor& x, int64_t axis);

}  // namespace quantkit::runtime
