// The one per-tensor plan building (pipelines::BuildActivationEntry) that calibrate, the public
// BuildPlan and Python share: its amax, its warnings and the share of values a method clips.
#include "pipelines/calibration_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "testing/tolerances.h"

namespace quantkit::pipelines {
namespace {

// |x| uniform on [0, 1): 10,000 evenly spaced values, so a method's clipped share is known.
quant::TensorCollector Uniform(quant::TensorCollector c = quant::TensorCollector()) {
  std::vector<float> v(10000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (i % 2 ? 1.0f : -1.0f) * static_cast<float>(i) / 10000.0f;
  EXPECT_TRUE(c.Observe({quant::FloatSpan(v), {static_cast<int64_t>(v.size())}}).ok());
  return c;
}

TEST(BuildActivationEntry, MaxClipsNothingAndWarnsOfNothing) {
  auto a = BuildActivationEntry("t", Uniform(), {quant::CalibMethod::kMax});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->entry.quantized);
  EXPECT_EQ(a->entry.tensor, "t");
  EXPECT_EQ(a->entry.source, "max");
  ASSERT_EQ(a->entry.amax.size(), 1u);
  EXPECT_EQ(a->entry.amax[0], 0.9999f);
  EXPECT_EQ(a->clipped_share, 0.0);
  EXPECT_TRUE(a->warnings.empty());
  // The range-only collector (calibrate's max fast path) gives the same entry.
  auto fast = BuildActivationEntry("t", Uniform(quant::TensorCollector::RangeOnly()),
                                   {quant::CalibMethod::kMax});
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(fast->entry.amax, a->entry.amax);
}

TEST(BuildActivationEntry, PercentileReportsTheShareItClips) {
  auto a = BuildActivationEntry("t", Uniform(), {quant::CalibMethod::kPercentile, 90.0});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->entry.source, "percentile:90");
  EXPECT_NEAR(a->clipped_share, 0.10, testing::kShareAboveAbs);
  EXPECT_GT(a->clipped_share, kClipWarnShare);
  EXPECT_TRUE(a->warnings.empty());  // the clipping warning is one per plan (BuildPlan)
}

TEST(BuildActivationEntry, NonFiniteValuesAndConstantTensorsAreReported) {
  quant::TensorCollector c;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {0.5f, nan, -2.0f, std::numeric_limits<float>::infinity()};
  ASSERT_TRUE(c.Observe({quant::FloatSpan(v), {4}}).ok());
  auto a = BuildActivationEntry("x", c, {quant::CalibMethod::kMax});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->warnings.size(), 1u);
  EXPECT_NE(a->warnings[0].find("1 NaN and 1 Inf of"), std::string::npos) << a->warnings[0];
  EXPECT_NE(a->entry.reason.find("NaN"), std::string::npos);
  EXPECT_EQ(a->entry.amax, std::vector<float>{2.0f});

  quant::TensorCollector zeros;
  const std::vector<float> z(8, 0.0f);
  ASSERT_TRUE(zeros.Observe({quant::FloatSpan(z), {8}}).ok());
  auto k = BuildActivationEntry("z", zeros, {quant::CalibMethod::kEntropy});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_FALSE(k->entry.quantized);
  ASSERT_EQ(k->warnings.size(), 1u);
  EXPECT_NE(k->warnings[0].find("tensor 'z' never varies"), std::string::npos) << k->warnings[0];
}

TEST(BuildActivationEntry, HistogramMethodOnARangeOnlyCollectorFails) {
  auto a = BuildActivationEntry("t", Uniform(quant::TensorCollector::RangeOnly()),
                                {quant::CalibMethod::kEntropy});
  EXPECT_FALSE(a.ok());
}

}  // namespace
}  // namespace quantkit::pipelines
