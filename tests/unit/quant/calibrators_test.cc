// Calibrator unit tests on small hand-made histograms (the reference agreement on the shared
// test vectors is in testvectors_test.cc, label "conformance").
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/calibrators/calibrators.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {
namespace {

Histogram Uniform(std::vector<int64_t> counts, double width) {
  Histogram h;
  h.counts = std::move(counts);
  for (size_t k = 0; k <= h.counts.size(); ++k) h.edges.push_back(static_cast<double>(k) * width);
  return h;
}

// Literal float64 transcription of pytorch-quantization's loop (sequential sums): the
// independent oracle for the fast O(levels) search.
int64_t BruteForcePqEntropy(const Histogram& hist, int64_t start, int64_t levels) {
  std::vector<int64_t> bins = hist.counts;
  bins[0] = bins[1];
  const int64_t n = static_cast<int64_t>(bins.size());
  int64_t total = 0;
  for (int64_t b : bins) total += b;
  double best = INFINITY;
  int64_t best_i = n;
  for (int64_t i = start; i <= n; ++i) {
    std::vector<double> sum(static_cast<size_t>(levels), 0), cnt(static_cast<size_t>(levels), 0);
    for (int64_t j = 0; j < i; ++j) {
      if (bins[static_cast<size_t>(j)] == 0) continue;
      sum[static_cast<size_t>(j * levels / i)] += static_cast<double>(bins[static_cast<size_t>(j)]);
      cnt[static_cast<size_t>(j * levels / i)] += 1;
    }
    std::vector<double> p(static_cast<size_t>(i)), q(static_cast<size_t>(i), 0);
    double sq = 0;
    for (int64_t j = 0; j < i; ++j) {
      p[static_cast<size_t>(j)] = static_cast<double>(bins[static_cast<size_t>(j)]);
      const size_t g = static_cast<size_t>(j * levels / i);
      if (bins[static_cast<size_t>(j)] != 0) q[static_cast<size_t>(j)] = sum[g] / cnt[g];
      sq += q[static_cast<size_t>(j)];
    }
    int64_t outliers = 0;
    for (int64_t j = i; j < n; ++j) outliers += bins[static_cast<size_t>(j)];
    p.back() += static_cast<double>(outliers);
    double d = 0;
    for (int64_t j = 0; j < i; ++j) {
      const double pk = p[static_cast<size_t>(j)] / static_cast<double>(total);
      const double qk = q[static_cast<size_t>(j)] / sq;
      if (pk > 0 && qk > 0)
        d += pk * std::log(pk / qk);
      else if (pk > 0)
        d = INFINITY;
    }
    if (d <= best) {
      best = d;
      best_i = i;
    }
  }
  return best_i;
}

TEST(EntropyAmax, FastSearchMatchesTheLiteralLoopOnRandomHistograms) {
  const uint32_t seed = static_cast<uint32_t>(::testing::UnitTest::GetInstance()->random_seed());
  std::printf("seed %u (replay with --gtest_random_seed=%u)\n", seed, seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t n = 64 + static_cast<int64_t>(rng() % 192);
    std::vector<int64_t> c(static_cast<size_t>(n));
    const double decay = 0.01 + 0.1 * (rng() % 100) / 100.0;
    for (int64_t k = 0; k < n; ++k) {
      const double mean = 1000.0 * std::exp(-decay * static_cast<double>(k));
      c[static_cast<size_t>(k)] =
          (rng() % 4 == 0) ? 0 : static_cast<int64_t>(mean * (rng() % 100) / 50.0);
    }
    c.back() += 1 + rng() % 5;  // outliers at the end
    const Histogram h = Uniform(c, 0.125);
    EntropyOptions o;
    o.start_bin = 16;
    o.num_bits = 5;  // 16 levels
    auto r = EntropyAmax(h, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->index, BruteForcePqEntropy(h, 16, 16)) << "trial " << trial;
    EXPECT_EQ(r->amax, static_cast<float>(h.edges[static_cast<size_t>(r->index)]));
    EXPECT_EQ(r->candidate_score.size(), static_cast<size_t>(n - 16 + 1));
  }
}

// The search has three code paths chosen by the shape of the problem: the offset table
// (L <= 1024 levels, the 8-bit case), boundary arithmetic (more levels), and direct logarithms
// when the level-term table would be too large (very many bins per level). Each must pick the
// literal loop's bin.
TEST(EntropyAmax, EveryCodePathMatchesTheLiteralLoop) {
  struct Case {
    int num_bits;
    bool is_unsigned;
    int64_t bins, start;
  };
  const Case cases[] = {
      {8, false, 300, 128},    // offset table, q in {1, 2}
      {5, false, 200, 3},      // candidates below L: zero-width levels
      {11, true, 2100, 2048},  // 2048 levels: boundary arithmetic
      {2, false, 3000, 2},     // 2 levels, 3000 bins: the table would exceed its cap
  };
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    std::vector<int64_t> counts(static_cast<size_t>(c.bins));
    for (int64_t k = 0; k < c.bins; ++k) {
      counts[static_cast<size_t>(k)] =
          (rng() % 5 == 0) ? 0
                           : static_cast<int64_t>(5000.0 / (1.0 + 0.02 * k) * (rng() % 100) / 50.0);
    }
    counts.back() += 3;
    const Histogram h = Uniform(counts, 0.01);
    EntropyOptions o;
    o.num_bits = c.num_bits;
    o.is_unsigned = c.is_unsigned;
    o.start_bin = c.start;
    auto r = EntropyAmax(h, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const int64_t levels = int64_t{1} << (c.num_bits - 1 + (c.is_unsigned ? 1 : 0));
    EXPECT_EQ(r->index, BruteForcePqEntropy(h, c.start, levels))
        << c.num_bits << " bits, " << c.bins << " bins";
  }
}

TEST(EntropyAmax, ClipsALoneOutlierAndHonoursTheThresholdRule) {
  std::vector<int64_t> c(2048, 0);
  for (int k = 0; k < 600; ++k) c[static_cast<size_t>(k)] = 1000 - k;
  c[2047] = 1;  // one far outlier
  const Histogram h = Uniform(c, 1.0 / 256);
  auto left = EntropyAmax(h, {});
  ASSERT_TRUE(left.ok());
  EXPECT_LT(left->index, 2048);
  EXPECT_GE(left->index, 128);
  EntropyOptions centre;
  centre.rule = EntropyThresholdRule::kBinCentre;
  auto mid = EntropyAmax(h, centre);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->index, left->index);
  EXPECT_EQ(mid->amax, static_cast<float>((static_cast<double>(left->index) + 0.5) / 256));
}

TEST(EntropyAmax, RejectsBadInputWithAMessage) {
  Histogram empty = Uniform(std::vector<int64_t>(256, 0), 1.0);
  EXPECT_FALSE(EntropyAmax(empty, {}).ok());
  Histogram small = Uniform(std::vector<int64_t>(64, 1), 1.0);
  auto r = EntropyAmax(small, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("start bin 128"), std::string::npos) << r.status().message();
  Histogram bad = Uniform(std::vector<int64_t>(256, 1), 1.0);
  bad.edges.pop_back();
  EXPECT_FALSE(EntropyAmax(bad, {}).ok());
  EXPECT_FALSE(MseAmax(bad, {}).ok());
  EXPECT_FALSE(PercentileAmax(bad, {}).ok());
  EXPECT_FALSE(OrtEntropyRange(bad, {}).ok());
  EXPECT_FALSE(MinimizeKlThreshold(Uniform(std::vector<int64_t>(256, 1), 1.0), {}).ok());  // even
}

TEST(Percentile, RunningSumTrapAndExactCountOption) {
  // 10^5 samples: 99 999 in bin 0, one in the last bin. p = 99.999: the exact cdf reaches
  // 0.99999 at bin 0.
  std::vector<int64_t> c(2048, 0);
  c[0] = 99999;
  c[2047] = 1;
  const Histogram h = Uniform(c, 0.5);
  PercentileOptions o;
  o.percentile = 99.999;
  o.exact_count_cdf = true;
  EXPECT_EQ(PercentileAmax(h, o)->index, 0);
  o.percentile = 100.0;
  EXPECT_EQ(PercentileAmax(h, o)->index, 2047);
  EXPECT_EQ(PercentileAmax(h, o)->amax, 1023.5f);  // left edge of the bin
  o.percentile = 101;
  EXPECT_FALSE(PercentileAmax(h, o).ok());
}

TEST(Percentile, OrtFlavoursClipToTheObservedRange) {
  const std::vector<float> v = {-1.0f, 0.5f, 2.0f, 3.0f};
  Histogram abs_h = PqAbsHistogram(FloatSpan(v), 8);
  PercentileOptions o;
  o.percentile = 100.0;
  o.flavor = PercentileFlavor::kOrtSymmetric;
  auto r = PercentileAmax(abs_h, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lo, -1.0f);    // -E[idx] clipped to the observed minimum
  EXPECT_EQ(r->hi, 2.6875f);  // |x| edges 0.5 + k·0.3125: the last bin starts at 2.6875
  Histogram signed_h = SignedSymmetricHistogram(FloatSpan(v), 8);
  o.flavor = PercentileFlavor::kOrtAsymmetric;
  o.percentile = 50.0;
  r = PercentileAmax(signed_h, o);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->lo, r->hi);
  EXPECT_GE(r->lo, -1.0f);
}

TEST(ExactPercentile, IsTheKthSmallestMagnitude) {
  const std::vector<float> v = {5, -1, 3, -4, 2, 0, 9, -8, 7, 6};
  EXPECT_EQ(*ExactPercentileAbs(FloatSpan(v), 0.5), 5.0f);  // k = 5 of sorted |v|
  EXPECT_EQ(*ExactPercentileAbs(FloatSpan(v), 0.0), 0.0f);
  EXPECT_FALSE(ExactPercentileAbs(FloatSpan(v), 1.0).ok());
}

TEST(Mse, PicksACentreAndPrefersTheFirstMinimum) {
  std::vector<int64_t> c(512, 0);
  for (int k = 0; k < 200; ++k) c[static_cast<size_t>(k)] = 200 - k;
  const Histogram h = Uniform(c, 1.0);
  auto r = MseAmax(h, {});
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->index, 128);
  EXPECT_LE(r->index, 200);
  EXPECT_EQ(r->amax, static_cast<float>(r->index) + 0.5f);  // a bin centre
  MseOptions late;
  late.start_bin = 600;
  EXPECT_FALSE(MseAmax(h, late).ok());
}

TEST(OrtEntropy, DefaultSettingsDegenerateToMinMax) {
  const std::vector<float> v = {-3.0f, 0.1f, 0.2f, 10.0f};
  const Histogram h = SignedSymmetricHistogram(FloatSpan(v), kOrtDefaultNumBins);
  auto r = OrtEntropyRange(h, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lo, -3.0f);
  EXPECT_EQ(r->hi, 10.0f);
  EXPECT_EQ(r->candidate_score.size(), 1u);
}

TEST(MinimizeKl, ClipsAHeavyTailedSignedHistogram) {
  std::vector<int64_t> c(401, 0);
  for (int k = -60; k <= 60; ++k) c[static_cast<size_t>(200 + k)] = 1000 / (1 + std::abs(k));
  c[0] = 1;
  c[400] = 1;
  Histogram h = Uniform(c, 0.01);
  for (double& e : h.edges) e -= 2.005;
  for (MinimizeKlVariant v : {MinimizeKlVariant::kCpp, MinimizeKlVariant::kMxnet15}) {
    MinimizeKlOptions o;
    o.num_quantized_bins = 31;
    o.variant = v;
    auto r = MinimizeKlThreshold(h, o);
    ASSERT_TRUE(r.ok());
    EXPECT_LT(r->amax, 1.9f);
    EXPECT_GT(r->amax, 0.1f);
  }
}

}  // namespace
}  // namespace quantkit::quant
