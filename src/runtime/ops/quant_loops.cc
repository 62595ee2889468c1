#include "runtime/ops/quant_loops.h"

#include "common/vector_clones.h"

// The division (IEEE, not a multiply by 1/scale: that would not be bit-exact) dominates these
// loops; AVX2 / AVX-512 copies divide 8 / 16 floats at once (common/vector_clones.h).
namespace quantkit::runtime::quant_loops {
namespace {

// std::max(v, lo) and std::min(v, hi) on values (a NaN v stays NaN), written as selects GCC can
// vectorize: std::max returns a reference, and a select between two addresses is not if-converted.
QK_ALWAYS_INLINE float AtLeast(float v, float lo) { return v < lo ? lo : v; }
QK_ALWAYS_INLINE float AtMost(float v, float hi) { return hi < v ? hi : v; }

// std::nearbyint in the default rounding mode (round half to even), without the libm call that
// keeps a loop scalar: adding and subtracting 1.5 * 2^23 rounds any |v| <= 2^22 to an integer the
// way the FPU rounds. Larger magnitudes are clamped to 2^22 first, which is an integer and
// saturates every 8- and 16-bit range the same as the unclamped value would; NaN passes through.
QK_ALWAYS_INLINE float RoundHalfToEven(float v) {
  constexpr float kLimit = 4194304.0f;   // 2^22
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  v = AtMost(AtLeast(v, -kLimit), kLimit);
  return (v + kShift) - kShift;
}

// The saturated quantized value as a float (an integer in [lo, hi]; 0 for NaN).
QK_ALWAYS_INLINE float QuantizedValue(float x, float scale, float zero_point, float lo, float hi) {
  const float c = AtMost(AtLeast(RoundHalfToEven(x / scale) + zero_point, lo), hi);
  return c == c ? c : 0.0f;
}

template <typename Q>
QK_ALWAYS_INLINE void Quantize(const float* x, Q* q, int64_t n, float scale, float zero_point,
                               float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    q[i] = static_cast<Q>(static_cast<int32_t>(QuantizedValue(x[i], scale, zero_point, lo, hi)));
  }
}

template <typename Q>
QK_ALWAYS_INLINE void Dequantize(const Q* q, float* r, int64_t n, float scale, int32_t zero_point) {
  for (int64_t i = 0; i < n; ++i)
    r[i] = static_cast<float>(static_cast<int32_t>(q[i]) - zero_point) * scale;
}

}  // namespace

QK_VECTOR_CLONES void QuantizeToInt8(const float* x, int8_t* q, int64_t n, float scale,
                                     float zero_point, float lo, float hi) {
  Quantize(x, q, n, scale, zero_point, lo, hi);
}
QK_VECTOR_CLONES void QuantizeToUint8(const float* x, uint8_t* q, int64_t n, float scale,
                                      float zero_point, float lo, float hi) {
  Quantize(x, q, n, scale, zero_point, lo, hi);
}
QK_VECTOR_CLONES void DequantizeInt8(const int8_t* q, float* r, int64_t n, float scale,
                                     int32_t zero_point) {
  Dequantize(q, r, n, scale, zero_point);
}
QK_VECTOR_CLONES void DequantizeUint8(const uint8_t* q, float* r, int64_t n, float scale,
                                      int32_t zero_point) {
  Dequantize(q, r, n, scale, zero_point);
}

// (q - zero_point) in float is exact: both are integers of at most 16 bits.
QK_VECTOR_CLONES void FakeQuantize(const float* x, float* r, int64_t n, float scale,
                                   float zero_point, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i)
    r[i] = (QuantizedValue(x[i], scale, zero_point, lo, hi) - zero_point) * scale;
}

}  // namespace quantkit::runtime::quant_loops
