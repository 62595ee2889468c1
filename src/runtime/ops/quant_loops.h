// Per-tensor QuantizeLinear / DequantizeLinear loops over dense buffers (no ATen here).
//
//   q = saturate(round_half_to_even(x / scale) + zero_point)     r = (q - zero_point) * scale
//
// Every float operation is the one the general ATen path does, in the same order (divide, round
// half to even, add the zero point in float, clamp to [lo, hi], truncate), so results are
// bit-identical to it and to quant::QuantizeValue. A NaN quantizes to code 0 (ONNX leaves it
// undefined; x86's truncation of NaN, which the scalar loop used to rely on, gave 0 as well).
// FakeQuantize is Dequantize(Quantize(x)) in one pass, without the 8-bit intermediate.
//
// quant_loops.cc is compiled so that GCC vectorizes these loops (src/runtime/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace quantkit::runtime::quant_loops {

void QuantizeToInt8(const float* x, int8_t* q, int64_t n, float scale, float zero_point, float lo,
                    float hi);
void QuantizeToUint8(const float* x, uint8_t* q, int64_t n, float scale, float zero_point, float lo,
                     float hi);
void DequantizeInt8(const int8_t* q, float* r, int64_t n, float scale, int32_t zero_point);
void DequantizeUint8(const uint8_t* q, float* r, int64_t n, float scale, int32_t zero_point);
void FakeQuantize(const float* x, float* r, int64_t n, float scale, float zero_point, float lo,
                  float hi);

}  // namespace quantkit::runtime::quant_loops
