// Float8 E4M3FN (ONNX FLOAT8E4M3FN, the FP8 format of TensorRT and of NVIDIA GPUs from compute
// capability 8.9: Ada, Hopper, Blackwell), to and from float32, outside the runtime (ATen 1.13 has
// no float8 dtype).
//
//   1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7F and 0xFF are NaN; the
//   largest finite value 448 (0x7E), the smallest normal 2^-6, the smallest subnormal 2^-9.
//   FloatToFloat8E4M3FN rounds to nearest even and saturates: a magnitude past 448, infinities
//   included, becomes +-448 (ONNX QuantizeLinear's and Cast's saturate=1, the default); NaN
//   becomes 0x7F. What onnxruntime computes (tests/e2e/fp8: every code and every tie).
#pragma once

#include <cstdint>

namespace quantkit::ir {

inline constexpr float kFloat8E4M3FNMax = 448.0f;

uint8_t FloatToFloat8E4M3FN(float value);
float Float8E4M3FNToFloat(uint8_t code);

}  // namespace quantkit::ir
