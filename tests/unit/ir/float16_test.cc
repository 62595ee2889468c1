// ir/float16.h: the conversions every layer outside the runtime reads and writes 16-bit floats
// with, against values worked out by hand (bit patterns from IEEE 754 / the bfloat16 layout).
#include "ir/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace quantkit::ir {
namespace {

TEST(Float16Conversion, RoundsToNearestEvenAndSaturatesToInfinity) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  // 65520 is the midpoint between 65504 and the next (unrepresentable) step: rounds to inf.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even (1); 1 + 3 * 2^-11 -> 1 + 2^-9.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Subnormals: 2^-24 is the smallest; half of it is a tie with 0 (even: 0).
  EXPECT_EQ(FloatToHalf(kFloat16MinSubnormal), 0x0001);
  EXPECT_EQ(FloatToHalf(kFloat16MinSubnormal / 2), 0x0000);
  EXPECT_EQ(HalfToFloat(0x0001), kFloat16MinSubnormal);
  EXPECT_EQ(HalfToFloat(0x0400), kFloat16MinNormal);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(-0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(FloatToHalf(-0.0f))));
}

TEST(Float16Conversion, BFloat16KeepsTheTopSixteenBitsRoundedToEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1); 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(BFloat16ToFloat(0x3F82), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(kBFloat16Max)), kBFloat16Max);
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::max()))));
  // A NaN whose payload sits in the dropped bits stays a NaN (rounding must not carry it into inf).
  const uint32_t nan_bits = 0x7F807FFFu;  // exponent all ones, payload only in the low bits
  float nan;
  std::memcpy(&nan, &nan_bits, sizeof(nan));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(nan))));
}

TEST(Float16Conversion, TensorsConvertBothWaysAndOtherTypesAreRefused) {
  const Tensor f =
      Tensor::FromVector(DType::kFloat, {3}, std::vector<float>{0.1f, -2.5f, 70000.0f});
  Result<Tensor> h = ConvertFloatTensor(f, DType::kFloat16);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->dtype(), DType::kFloat16);
  std::vector<float> back;
  ASSERT_TRUE(ReadFloatValues(*h, &back));
  EXPECT_EQ(back[0], RoundToFloatType(0.1f, DType::kFloat16));
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_TRUE(std::isinf(back[2]));
  Result<Tensor> b = ConvertFloatTensor(*h, DType::kBFloat16);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(ReadFloatValues(*b, &back));
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_FALSE(ConvertFloatTensor(Tensor(DType::kInt8, {2}), DType::kFloat16).ok());
  EXPECT_FALSE(ConvertFloatTensor(f, DType::kInt8).ok());
  std::vector<float> untouched{7};
  EXPECT_FALSE(ReadFloatValues(Tensor(DType::kInt32, {1}), &untouched));
  EXPECT_EQ(untouched, std::vector<float>{7});
}

}  // namespace
}  // namespace quantkit::ir
