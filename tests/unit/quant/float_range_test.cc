// quant/float_range.h: which tensors calibration statistics keep out of float16. Each case
// builds the statistics from values whose answer is known by construction (powers of two at the
// thresholds), so a wrong bound, margin or order of the rules flips a verdict.
#include "quant/float_range.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ir/float16.h"

namespace quantkit::quant {
namespace {

TensorCollector Collect(const std::vector<float>& values) {
  TensorCollector c;
  EXPECT_TRUE(c.Observe(TensorView{FloatSpan(values), {static_cast<int64_t>(values.size())}}).ok());
  return c;
}

TEST(FloatRange, OverflowUsesTheMarginAndBFloat16HasFloat32Range) {
  const TensorCollector stats = Collect({1.0f, -20000.0f, 3.0f});
  FloatRangeOptions o;
  FloatRangeCheck c = CheckFloatRange(stats, o);
  EXPECT_EQ(c.verdict, FloatRangeVerdict::kOverflow) << c.reason;
  EXPECT_DOUBLE_EQ(c.amax, 20000.0);
  EXPECT_NEAR(c.headroom, 65504.0 / 20000.0, 1e-12);
  o.range_margin = 3.0;  // 20000 * 3 = 60000 <= 65504
  EXPECT_TRUE(CheckFloatRange(stats, o).fits()) << CheckFloatRange(stats, o).reason;
  o.range_margin = kDefaultFloat16RangeMargin;
  o.dtype = ir::DType::kBFloat16;
  EXPECT_TRUE(CheckFloatRange(stats, o).fits());
}

TEST(FloatRange, NonFiniteValuesAreRefusedFirst) {
  const TensorCollector stats = Collect({1.0f, std::numeric_limits<float>::quiet_NaN(), 1e6f});
  const FloatRangeCheck c = CheckFloatRange(stats, {});
  EXPECT_EQ(c.verdict, FloatRangeVerdict::kNonFinite) << c.reason;
  EXPECT_EQ(c.nonfinite, 1);
}

TEST(FloatRange, SubnormalShareIsExactBelowOneAndBoundedAbove) {
  // amax < 1: fine bins are at most 2^-14 wide, so the share is exact. 3 of 4 non-zero values
  // are below 2^-14 (zeros do not count).
  const float tiny = std::ldexp(1.0f, -16);
  FloatRangeCheck c = CheckFloatRange(Collect({tiny, -tiny, tiny, 0.5f, 0.0f, 0.0f}), {});
  EXPECT_EQ(c.verdict, FloatRangeVerdict::kUnderflow) << c.reason;
  EXPECT_DOUBLE_EQ(c.subnormal_share_min, 0.75);
  EXPECT_DOUBLE_EQ(c.subnormal_share_max, 0.75);
  EXPECT_EQ(c.nonzero, 4);
  // amax = 1000 (range 2^10, bins 2^-4 wide): the tiny values share bin 0 with 0.01, so the share
  // is only bounded: at least 0 (no bin ends below 2^-14), at most 4/5.
  c = CheckFloatRange(Collect({tiny, tiny, tiny, 0.01f, 1000.0f}), {});
  EXPECT_DOUBLE_EQ(c.subnormal_share_min, 0.0);
  EXPECT_DOUBLE_EQ(c.subnormal_share_max, 0.8);
  EXPECT_TRUE(c.fits()) << "an upper bound alone does not refuse: " << c.reason;
  FloatRangeOptions bf16;
  bf16.dtype = ir::DType::kBFloat16;
  EXPECT_TRUE(CheckFloatRange(Collect({tiny, -tiny, tiny, 0.5f}), bf16).fits());
}

TEST(FloatRange, ConstantsAreCheckedExactly) {
  const ir::Tensor w = ir::Tensor::FromVector(ir::DType::kFloat, {4}, std::vector<float>{1e-7f, 2e-7f, 0.1f, 0.0f});
  FloatRangeCheck c = CheckFloatRange(w, {});
  EXPECT_EQ(c.verdict, FloatRangeVerdict::kUnderflow) << c.reason;
  EXPECT_DOUBLE_EQ(c.subnormal_share_min, 2.0 / 3.0);
  FloatRangeOptions lenient;
  lenient.max_subnormal_share = 0.7;
  EXPECT_TRUE(CheckFloatRange(w, lenient).fits());
  EXPECT_EQ(CheckFloatRange(ir::Tensor(ir::DType::kInt8, {2}), {}).verdict, FloatRangeVerdict::kNoData);
  EXPECT_EQ(CheckFloatRange(TensorCollector(), {}).verdict, FloatRangeVerdict::kNoData);
}

TEST(FloatRange, OptionsAreRangeChecked) {
  FloatRangeOptions o;
  EXPECT_TRUE(CheckFloatRangeOptions(o).ok());
  o.range_margin = 0.5;
  EXPECT_FALSE(CheckFloatRangeOptions(o).ok());
  o = {};
  o.max_subnormal_share = 1.5;
  EXPECT_FALSE(CheckFloatRangeOptions(o).ok());
  o = {};
  o.dtype = ir::DType::kFloat;
  EXPECT_FALSE(CheckFloatRangeOptions(o).ok());
}

}  // namespace
}  // namespace quantkit::quant
