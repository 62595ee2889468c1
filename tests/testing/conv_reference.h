// A convolution whose float32 result is checked against float64 with a tolerance that IEEE
// float32 meets and TF32 cannot (tests/cuda: Cuda.ConvolutionIsIeeeFloat32; tests/unit/runtime:
// the same bound checked on the CPU, where TF32 is simulated by rounding the inputs).
//
// Error measure: per output element, |y32 - y64| / S with S = sum |w| * |x| over its terms
// (the sum's own scale, so cancellation does not inflate it). Measured on this case (K = 576
// terms per element, ATen 1.13 on the CPU): float32 2.4e-7, TF32-rounded inputs 1.1e-4;
// the bound, kTf32SeparatingRelError = 1e-5, sits 40x above the one and 10x below the other
// (room for cuDNN's Winograd/FFT algorithms in IEEE float32).
#pragma once

#include <ATen/ATen.h>

#include <cmath>

#include "testing/tolerances.h"

namespace quantkit::testing {

struct ConvCase {
  at::Tensor x;  // float32 [8, 64, 16, 16], N(0, 1)
  at::Tensor w;  // float32 [64, 64, 3, 3], N(0, 1)
};

inline ConvCase MakeConvCase() {
  at::Generator gen = at::detail::createCPUGenerator(/*seed_val=*/26);
  ConvCase c;
  c.x = at::normal(0.0, 1.0, {8, 64, 16, 16}, gen);
  c.w = at::normal(0.0, 1.0, {64, 64, 3, 3}, gen);
  return c;
}

// max over elements of |y - reference| / S, all in float64 on the host.
inline double ConvRelativeError(const ConvCase& c, const at::Tensor& y) {
  const at::Tensor xd = c.x.to(at::kDouble), wd = c.w.to(at::kDouble);
  const at::Tensor ref = at::conv2d(xd, wd, {}, 1, 1);
  const at::Tensor scale = at::conv2d(xd.abs(), wd.abs(), {}, 1, 1);
  return ((y.to(at::kCPU).to(at::kDouble) - ref).abs() / scale).max().item<double>();
}

// Rounds float32 values to TF32 (10 explicit mantissa bits, round to nearest even), as tensor
// cores read them. Integer arithmetic on the bit patterns, unsigned, in int64.
inline at::Tensor RoundToTf32(const at::Tensor& t) {
  const int64_t step = int64_t{1} << 13;  // the 13 mantissa bits TF32 drops
  at::Tensor bits = t.contiguous().view(at::kInt).to(at::kLong).bitwise_and(int64_t{0xFFFFFFFF});
  at::Tensor lsb = at::div(bits, step, "floor").remainder(2);
  at::Tensor rounded = at::div(bits + (step / 2 - 1) + lsb, step, "floor") * step;
  rounded = at::where(rounded >= (int64_t{1} << 31), rounded - (int64_t{1} << 32), rounded);
  return rounded.to(at::kInt).view(at::kFloat);
}

}  // namespace quantkit::testing
