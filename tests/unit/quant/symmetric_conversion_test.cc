// The asymmetric -> symmetric int8 rule (quant/symmetric_conversion.h) on hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/symmetric_conversion.h"

namespace quantkit::quant {
namespace {

using ir::DType;

// Ratios and bit counts are computed in double from float32 scales: compare to the hand values
// within float32 rounding of the scale (relative).
constexpr double kFloatScaleRel = 1e-6;

TEST(SymmetricConversion, Uint8AfterReluWastesTheSignBit) {
  // uint8 zp 0, scale 0.1: range [0, 25.5] -> amax 25.5, step 25.5/127 = 2.0079 x the old one.
  auto c = ToSymmetricInt8(0.1f, 0, DType::kUint8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->changed);
  EXPECT_TRUE(c->sign_bit_wasted);
  EXPECT_DOUBLE_EQ(c->lo, 0.0);
  EXPECT_NEAR(c->hi, 25.5, 25.5 * kFloatScaleRel);
  EXPECT_EQ(c->scale_to, static_cast<float>(c->hi) / 127.0f);
  EXPECT_NEAR(c->scale_ratio, 255.0 / 127.0, kFloatScaleRel);
  EXPECT_NEAR(c->bits_lost, std::log2(255.0 / 127.0), kFloatScaleRel);
  // Codes 0..127 cover [0, 25.5]; the 128 negative codes are never used.
  EXPECT_DOUBLE_EQ(c->wasted_share, 0.5);
  EXPECT_DOUBLE_EQ(c->clipped_share, 0.0);
}

TEST(SymmetricConversion, CenteredUint8LosesAlmostNothing) {
  // zp 128: [-12.8, 12.7] -> amax 12.8; codes -127..126 are used (254 of 256).
  auto c = ToSymmetricInt8(0.1f, 128, DType::kUint8);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->sign_bit_wasted);
  EXPECT_NEAR(c->scale_ratio, 128.0 / 127.0, kFloatScaleRel);
  EXPECT_NEAR(c->wasted_share, 2.0 / 256.0, 1e-12);
  EXPECT_DOUBLE_EQ(c->clipped_share, 0.0);
}

TEST(SymmetricConversion, AsymmetricInt8UsesTheLargerSide) {
  // int8 zp -5: [-123 s, 132 s] -> amax 132 s.
  auto c = ToSymmetricInt8(0.01f, -5, DType::kInt8);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->changed);
  EXPECT_NEAR(c->scale_ratio, 132.0 / 127.0, kFloatScaleRel);
}

TEST(SymmetricConversion, SymmetricInt8IsKeptExactly) {
  auto c = ToSymmetricInt8(0.02f, 0, DType::kInt8);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->changed);
  EXPECT_EQ(c->scale_to, 0.02f);  // bit-exact: same grid
  EXPECT_DOUBLE_EQ(c->bits_lost, 0.0);
  EXPECT_DOUBLE_EQ(c->wasted_share, 0.0);
}

TEST(SymmetricConversion, RejectsBadParameters) {
  // Without these checks a zero/NaN scale would produce a NaN ratio in reports.
  EXPECT_FALSE(ToSymmetricInt8(0.0f, 0, DType::kUint8).ok());
  EXPECT_FALSE(ToSymmetricInt8(-1.0f, 0, DType::kUint8).ok());
  EXPECT_FALSE(ToSymmetricInt8(std::numeric_limits<float>::quiet_NaN(), 0, DType::kUint8).ok());
  EXPECT_FALSE(ToSymmetricInt8(0.1f, 300, DType::kUint8).ok());
  EXPECT_FALSE(ToSymmetricInt8(0.1f, -1, DType::kUint8).ok());
  EXPECT_FALSE(ToSymmetricInt8(0.1f, 0, DType::kInt32).ok());
}

}  // namespace
}  // namespace quantkit::quant
