#include "ir/float8.h"

#include <cmath>

namespace quantkit::ir {

uint8_t FloatToFloat8E4M3FN(float value) {
  if (std::isnan(value)) return 0x7F;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float a = std::fabs(value);
  // Everything from 448 up rounds to 448 or saturates to it (480 would be the NaN code).
  if (a >= kFloat8E4M3FNMax) return sign | 0x7E;
  // Below the smallest normal 2^-6: k * 2^-9 for k = 0..8, and k = 8 is the smallest normal's
  // code (0x08), so the rounded count is the code. Scaling by 2^9 is exact; nearbyint rounds half
  // to even in the default rounding mode.
  if (a < 0.015625f) return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  int e = 0;
  std::frexp(a, &e);     // a in [2^(e-1), 2^e)
  int exponent = e - 1;  // -6..8
  // 8 + the 3 mantissa bits: a / 2^(exponent - 3) in [8, 16), rounded half to even.
  int mantissa = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - exponent)));
  if (mantissa == 16) {
    mantissa = 8;
    ++exponent;
  }
  // a < 448 keeps the code at most 0x7E (exponent 8, mantissa 14).
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) | (mantissa - 8));
}

float Float8E4M3FNToFloat(uint8_t code) {
  const int exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  float v = 0;
  if (exponent == 0xF && mantissa == 0x7) {
    v = NAN;
  } else if (exponent == 0) {
    v = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    v = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  }
  return (code & 0x80) ? -v : v;
}

}  // namespace quantkit::ir
