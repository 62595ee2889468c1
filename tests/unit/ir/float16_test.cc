// ir/float16: the FP16 / BF16 conversions every FP16 writer and reader relies on. Exhaustive over
// the 65536 FP16 and BF16 bit patterns (round trips exact), plus the rounding cases by hand:
// ties to even, the overflow threshold, subnormals and the flush to zero.
#include "ir/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace quantkit::ir {
namespace {

bool IsNanHalf(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(Float16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = HalfToFloat(bits);
    if (IsNanHalf(bits)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(IsNanHalf(FloatToHalf(f))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), bits) << "bits 0x" << std::hex << h << " value " << f;
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00u);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000u);
  EXPECT_EQ(FloatToHalf(kFloat16Max), 0x7bffu);
  EXPECT_EQ(FloatToHalf(kFloat16MinNormal), 0x0400u);
  EXPECT_EQ(FloatToHalf(kFloat16MinSubnormal), 0x0001u);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000u);
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555u), 0.333251953125f);
}

TEST(Float16, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9: rounds up to even.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
  // Just above the tie rounds up.
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01u);
  // 65520 is the tie between 65504 and 65536 (not representable): it overflows to inf; below stays.
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00u);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  // Subnormals round at 2^-24; half of the smallest subnormal ties to zero, just above to 1 unit.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(FloatToHalf(1e-12f), 0x0000u);  // flushed: what FP16 does to a BERT epsilon
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(FloatToHalf(std::nextafter(kFloat16MinNormal, 0.0f)), 0x0400u);
}

TEST(BFloat16, EveryBFloat16RoundTripsAndTiesToEven) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = BFloat16ToFloat(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBFloat16(f), bits) << b;
  }
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);      // tie -> even (1.0)
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(RoundToFloatType, RoundsAsTheDTypeHolds) {
  EXPECT_EQ(RoundToFloatType(0.1f, DType::kFloat), 0.1f);
  EXPECT_EQ(RoundToFloatType(0.1f, DType::kFloat16), 0.0999755859375f);
  EXPECT_EQ(RoundToFloatType(0.1f, DType::kBFloat16), 0.10009765625f);
  EXPECT_TRUE(std::isinf(RoundToFloatType(1e5f, DType::kFloat16)));
  EXPECT_EQ(RoundToFloatType(1e5f, DType::kBFloat16), 99840.0f);
}

}  // namespace
}  // namespace quantkit::ir
