// The two algorithms of the device statistics (runtime/tensor_stats_aten.h): kFast (a few passes,
// no synchronisation, valid for finite tensors) must give exactly kExact's figures, defer to it
// when a tensor holds NaN or infinity, and count past float32's 2^24 exactly. The host collectors
// hold kExact to the host algorithm (tests/unit/analysis/device_stats_test.cc).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/tensor_stats_aten.h"
#include "testing/emulated_device.h"

namespace quantkit::runtime {
namespace {

void ExpectSameStats(const TensorStats& a, const TensorStats& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.nan_count, b.nan_count);
  EXPECT_EQ(a.posinf_count, b.posinf_count);
  EXPECT_EQ(a.neginf_count, b.neginf_count);
  EXPECT_EQ(a.zero_count, b.zero_count);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.has_histogram, b.has_histogram);
  EXPECT_EQ(a.has_range, b.has_range);
  EXPECT_EQ(a.range_exp, b.range_exp);
  EXPECT_EQ(a.positive, b.positive);
  EXPECT_EQ(a.negative, b.negative);
  EXPECT_EQ(a.has_per_channel, b.has_per_channel);
  EXPECT_EQ(a.channel_amax, b.channel_amax);
  EXPECT_EQ(a.channel_nonfinite, b.channel_nonfinite);
}

// Activations as calibration meets them: ReLU-like halves of zeros, signed values, -0, values on
// bin edges (powers of two), ranges from 1e-36 (below float32's 2^-113 single-factor scale
// limit) to 1e30, and an integer tensor.
std::vector<at::Tensor> FiniteCases() {
  at::manual_seed(7);
  std::vector<at::Tensor> cases;
  for (double scale : {1.0, 1e-3, 1e-36, 37.5, 1e30}) {
    at::Tensor x = at::randn({4, 6, 5, 3}) * scale;
    cases.push_back(x);
    cases.push_back(at::relu(x));
  }
  at::Tensor edges =
      at::tensor({0.0f, -0.0f, 1.0f, 2.0f, -4.0f, 0.5f, 3.0f, 0.75f, -1.0f, 0.25f, -0.125f, 1.5f});
  cases.push_back(edges.reshape({2, 6}));
  cases.push_back(at::zeros({3, 4}));
  cases.push_back(at::arange(-20, 40, at::kInt).reshape({3, 20}));
  return cases;
}

TEST(TensorStatsFast, EqualsExactOnFiniteTensors) {
  for (const at::Device device : {at::Device(at::kCPU), at::Device(at::kPrivateUse1, 0)}) {
    if (device.type() == at::kPrivateUse1) testing::EmulatedDevice();
    int i = 0;
    for (const at::Tensor& host : FiniteCases()) {
      const at::Tensor x = host.to(device);
      for (int log2_bins : {14, 3}) {
        for (bool histogram : {true, false}) {
          TensorStatsRequest request;
          request.log2_bins = log2_bins;
          request.histogram = histogram;
          request.channel_axis = 1;
          auto fast = LaunchTensorStats(x, request, StatsAlgorithm::kFast);
          ASSERT_TRUE(fast.ok()) << fast.status().ToString();
          const at::Tensor packed = fast->packed.cpu().contiguous();
          ASSERT_TRUE(FinishTensorStats(packed.data_ptr<double>(), &*fast))
              << "finite, yet deferred";
          EXPECT_FALSE(fast->source.defined()) << "a finished tensor must not stay alive";
          auto exact = ComputeTensorStats(x, request, StatsAlgorithm::kExact);
          ASSERT_TRUE(exact.ok()) << exact.status().ToString();
          ExpectSameStats(fast->stats, *exact,
                          "case " + std::to_string(i) + " on " + device.str() + ", 2^" +
                              std::to_string(log2_bins) + " bins, histogram " +
                              std::to_string(histogram));
        }
      }
      ++i;
    }
  }
}

TEST(TensorStatsFast, NonFiniteTensorsAreRecomputedExactly) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& values :
       {std::vector<float>{1.0f, nan, -3.0f, 0.0f}, std::vector<float>{kInf, 2.0f, -0.5f, 0.0f},
        std::vector<float>{-kInf, 0.25f, 0.0f, 0.0f}, std::vector<float>{nan, kInf, -kInf, nan}}) {
    const at::Tensor x = at::tensor(values).reshape({2, 2});
    TensorStatsRequest request;
    request.channel_axis = 0;
    auto fast = LaunchTensorStats(x, request, StatsAlgorithm::kFast);
    ASSERT_TRUE(fast.ok());
    const at::Tensor packed = fast->packed.contiguous();
    EXPECT_FALSE(FinishTensorStats(packed.data_ptr<double>(), &*fast));
    EXPECT_TRUE(fast->source.defined()) << "the exact recomputation needs the tensor";
    auto deferred = ComputeTensorStats(x, request, StatsAlgorithm::kFast);
    auto exact = ComputeTensorStats(x, request, StatsAlgorithm::kExact);
    ASSERT_TRUE(deferred.ok() && exact.ok());
    EXPECT_GT(exact->nonfinite_count(), 0);
    ExpectSameStats(*deferred, *exact, "non-finite");
  }
}

// float32 counts stop at 2^24 (2^24 + 1 rounds back); a bin of a large activation holds more.
TEST(TensorStatsFast, BinCountsBeyondFloat32PrecisionAreExact) {
  constexpr int64_t kMany = (int64_t{1} << 24) + 3;
  at::Tensor x = at::ones({kMany});
  x[0] = 2.0f;
  x[1] = 0.0f;
  auto stats = ComputeTensorStats(x, TensorStatsRequest{}, StatsAlgorithm::kFast);
  ASSERT_TRUE(stats.ok());
  ASSERT_TRUE(stats->has_range);
  EXPECT_EQ(stats->range_exp, 2);  // the smallest power of two above 2.0 is 4
  EXPECT_EQ(stats->zero_count, 1);
  EXPECT_EQ(stats->positive[size_t{1} << 12], kMany - 2);  // 1.0 * 2^(14-2)
  EXPECT_EQ(stats->positive[size_t{1} << 13], 1);          // 2.0
  EXPECT_EQ(stats->positive[0], 0);
}

}  // namespace
}  // namespace quantkit::runtime
