// ir/float8.h: E4M3FN to and from float32 (the exhaustive check against onnxruntime is
// tests/e2e/fp8; these pin the format's landmarks without it).
#include "ir/float8.h"

#include <gtest/gtest.h>

#include <cmath>

namespace quantkit::ir {
namespace {

TEST(Float8E4M3FN, EveryFiniteCodeDecodesAndEncodesBackToItself) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = Float8E4M3FNToFloat(static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      ++nan_codes;
      continue;
    }
    EXPECT_EQ(FloatToFloat8E4M3FN(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(nan_codes, 2);  // 0x7F and 0xFF
}

TEST(Float8E4M3FN, Landmarks) {
  EXPECT_EQ(Float8E4M3FNToFloat(0x7E), 448.0f);
  EXPECT_EQ(Float8E4M3FNToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(Float8E4M3FNToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(Float8E4M3FNToFloat(0x38), 1.0f);
  EXPECT_TRUE(std::signbit(Float8E4M3FNToFloat(0x80)));
}

TEST(Float8E4M3FN, RoundsHalfToEvenAndSaturates) {
  // 1 + 1/16 lies halfway between 1 (0x38, even) and 1.125 (0x39): to 1; 1 + 3/16 between 0x39
  // and 1.25 (0x3A, even): up.
  EXPECT_EQ(FloatToFloat8E4M3FN(1.0625f), 0x38);
  EXPECT_EQ(FloatToFloat8E4M3FN(1.1875f), 0x3A);
  EXPECT_EQ(FloatToFloat8E4M3FN(std::nextafter(1.0625f, 2.0f)), 0x39);
  // Subnormals: half the smallest (2^-10) rounds to 0 (even), 3 * 2^-10 to 2 * 2^-9 (even).
  EXPECT_EQ(FloatToFloat8E4M3FN(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(FloatToFloat8E4M3FN(std::ldexp(3.0f, -10)), 0x02);
  // Past the largest: 448 whatever the magnitude, infinities included; NaN is 0x7F.
  for (float v : {449.0f, 464.0f, 480.0f, 1e30f, INFINITY}) {
    EXPECT_EQ(FloatToFloat8E4M3FN(v), 0x7E) << v;
    EXPECT_EQ(FloatToFloat8E4M3FN(-v), 0xFE) << v;
  }
  EXPECT_EQ(FloatToFloat8E4M3FN(NAN), 0x7F);
  EXPECT_EQ(FloatToFloat8E4M3FN(-0.0f), 0x80);
}

}  // namespace
}  // namespace quantkit::ir
