// The device-side statistics (runtime/tensor_stats.h, plain ATen) against the host collectors
// (quant/collectors/): the same batches, observed on the host or summarised by the device
// algorithm (here run on CPU tensors) and merged, must give equal collectors and byte-identical
// .qkstats. tests/cuda/ runs the same comparison on a GPU. Without this, a GPU calibration could
// silently produce different scales than the CPU one for the same data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "analysis/collect_pass.h"
#include "formats/qkstats.h"
#include "quant/collectors/tensor_collector.h"
#include "runtime/tensor_stats.h"

namespace quantkit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Batch {
  std::vector<float> values;
  std::vector<int64_t> shape;
};

// Batches whose range grows and shrinks, with every special value the policy names: NaN, +-Inf,
// +-0, subnormals, exact powers of two (the range boundary), FLT_MAX and values on bin edges.
std::vector<Batch> MakeBatches(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Batch> batches;
  const float scales[] = {1.0f, 0.01f, 37.5f, 1e-30f, 3e5f, 1.0f};
  const int64_t sizes[] = {6, 1, 3, 5, 2, 4};
  for (int b = 0; b < 6; ++b) {
    Batch batch;
    batch.shape = {sizes[b], 3, 4, 5};
    const int64_t n = sizes[b] * 60;
    for (int64_t i = 0; i < n; ++i) batch.values.push_back(normal(rng) * scales[b]);
    batches.push_back(std::move(batch));
  }
  auto& s = batches[0].values;
  s[0] = kNaN;
  s[1] = kInf;
  s[2] = -kInf;
  s[3] = 0.0f;
  s[4] = -0.0f;
  s[5] = 4.0f;
  s[6] = -8.0f;
  s[7] = std::numeric_limits<float>::denorm_min();
  s[8] = -1e-40f;
  auto& t = batches[2].values;
  t[0] = std::numeric_limits<float>::max();
  t[1] = -0.0f;
  t[2] = std::ldexp(1.0f, -100);
  auto& u = batches[3].values;  // the range shrinks: all tiny values after a huge one
  u[0] = std::numeric_limits<float>::min();
  u[1] = kNaN;
  return batches;
}

quant::TensorView View(const Batch& b) {
  return {quant::FloatSpan(b.values.data(), b.values.size()), b.shape};
}

runtime::TensorView RuntimeView(const Batch& b) {
  return {ir::DType::kFloat, b.shape, b.values.data()};
}

// Observes every batch on the host, and summarises every batch with the device algorithm on
// the CPU then merges; returns both collectors.
void CollectBoth(const std::vector<Batch>& batches, std::optional<int64_t> axis, int log2_bins,
                 quant::TensorCollector* host, quant::TensorCollector* device) {
  *host = quant::TensorCollector(log2_bins, axis);
  *device = quant::TensorCollector(log2_bins, axis);
  runtime::TensorStatsRequest request;
  request.log2_bins = log2_bins;
  request.min_range_exp = quant::kMinRangeExp;
  request.channel_axis = axis;
  for (const Batch& b : batches) {
    ASSERT_TRUE(host->Observe(View(b)).ok());
    auto stats = runtime::ComputeTensorStats(RuntimeView(b), request, runtime::Device{});
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    auto batch = analysis::CollectorFromStats(*stats, log2_bins);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_TRUE(device->Merge(*batch).ok());
  }
}

std::string Serialize(const quant::TensorCollector& c, int log2_bins) {
  formats::StatsFile file;
  file.model_sha256 = std::string(64, '0');
  file.histogram_log2_bins = log2_bins;
  file.tensors.emplace("t", c);
  return formats::SerializeStats(file);
}

TEST(DeviceStats, EqualsHostCollectorByteForByte) {
  const uint32_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  std::printf("seed %u (--gtest_random_seed=%u replays it)\n", seed, seed);
  for (int log2_bins : {quant::kDefaultStreamLog2Bins, quant::kMinStreamLog2Bins}) {
    quant::TensorCollector host, device;
    CollectBoth(MakeBatches(seed), std::nullopt, log2_bins, &host, &device);
    EXPECT_TRUE(host == device) << "log2_bins " << log2_bins;
    EXPECT_EQ(host.range().count, device.range().count);
    EXPECT_EQ(host.range().nan_count, 2);
    EXPECT_EQ(device.range().nan_count, 2);
    EXPECT_EQ(host.histogram().range_exp(), device.histogram().range_exp());
    EXPECT_EQ(Serialize(host, log2_bins), Serialize(device, log2_bins));
  }
}

TEST(DeviceStats, PerChannelEqualsHost) {
  const uint32_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  // Axis 0 is the batch dimension here, whose size changes from batch to batch.
  for (int64_t axis : {1, 2, -1}) {
    quant::TensorCollector host, device;
    CollectBoth(MakeBatches(seed + 1), axis, quant::kDefaultStreamLog2Bins, &host, &device);
    ASSERT_TRUE(device.per_channel().has_value());
    EXPECT_TRUE(host == device) << "axis " << axis;
    EXPECT_EQ(host.per_channel()->amax, device.per_channel()->amax) << "axis " << axis;
    EXPECT_EQ(host.per_channel()->nonfinite_count, device.per_channel()->nonfinite_count);
  }
}

TEST(DeviceStats, SplitBatchesMergeToTheSameResult) {
  // Partition invariance through the device path: one batch or the same values in three.
  Batch all;
  all.shape = {6, 10};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-50.0f, 50.0f);
  for (int i = 0; i < 60; ++i) all.values.push_back(u(rng));
  std::vector<Batch> parts(3);
  for (int p = 0; p < 3; ++p) {
    parts[p].shape = {2, 10};
    parts[p].values.assign(all.values.begin() + p * 20, all.values.begin() + (p + 1) * 20);
  }
  quant::TensorCollector h1, d1, h3, d3;
  CollectBoth({all}, std::nullopt, quant::kDefaultStreamLog2Bins, &h1, &d1);
  CollectBoth(parts, std::nullopt, quant::kDefaultStreamLog2Bins, &h3, &d3);
  EXPECT_TRUE(d1 == d3);
  EXPECT_TRUE(h1 == d3);
}

TEST(DeviceStats, EmptyAllZeroAndAllNonFiniteBatches) {
  std::vector<Batch> batches(3);
  batches[0].shape = {0, 4};
  batches[1].shape = {2, 2};
  batches[1].values = {0.0f, -0.0f, 0.0f, 0.0f};
  batches[2].shape = {3};
  batches[2].values = {kNaN, kInf, -kInf};
  quant::TensorCollector host, device;
  CollectBoth(batches, std::nullopt, quant::kDefaultStreamLog2Bins, &host, &device);
  EXPECT_TRUE(host == device);
  EXPECT_TRUE(device.histogram().empty_range());
  EXPECT_EQ(device.range().zero_count, 4);
  EXPECT_EQ(device.histogram().nonfinite_count(), 3);
}

TEST(DeviceStats, BadChannelAxisIsAnError) {
  Batch b;
  b.shape = {2, 2};
  b.values = {1, 2, 3, 4};
  runtime::TensorStatsRequest request;
  request.channel_axis = 2;
  auto stats = runtime::ComputeTensorStats(RuntimeView(b), request, runtime::Device{});
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(stats.status().message().find("axis 2"), std::string::npos) << stats.status().message();
}

}  // namespace
}  // namespace quantkit
