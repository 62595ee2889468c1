// Collectors: exact statistics, streaming growth, and partition invariance (property tests with
// a printed, replayable seed: --gtest_random_seed=N).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "quant/calibrators/calibrators.h"
#include "quant/collectors/histogram.h"
#include "quant/collectors/per_channel.h"
#include "quant/collectors/range.h"
#include "quant/collectors/tensor_collector.h"
#include "quant/method_amax.h"
#include "quant/reference_histograms.h"
#include "testing/tolerances.h"
#include "tv_support.h"

namespace quantkit::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Seed() {
  const uint32_t seed = static_cast<uint32_t>(::testing::UnitTest::GetInstance()->random_seed());
  std::printf("seed %u (replay with --gtest_random_seed=%u)\n", seed, seed);
  return seed;
}

TEST(RangeCollector, CountsSpecialValuesAndKeepsFiniteRange) {
  const std::vector<float> v = {0.0f, -0.0f, 1.5f, -3.0f, kNaN, kInf, -kInf, 2.0f};
  RangeCollector c;
  c.Observe(FloatSpan(v));
  const RangeStats s = c.Finalize();
  EXPECT_EQ(s.count, 8);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.posinf_count, 1);
  EXPECT_EQ(s.neginf_count, 1);
  EXPECT_EQ(s.zero_count, 2);
  EXPECT_EQ(s.finite_count(), 5);
  EXPECT_EQ(s.min, -3.0f);
  EXPECT_EQ(s.max, 2.0f);
  EXPECT_EQ(s.amax, 3.0f);
}

TEST(RangeCollector, SignedZeroDoesNotDependOnOrder) {
  RangeCollector a, b;
  const std::vector<float> z1 = {-0.0f, 0.0f}, z2 = {0.0f, -0.0f};
  a.Observe(FloatSpan(z1));
  b.Observe(FloatSpan(z2));
  EXPECT_FALSE(std::signbit(a.Finalize().min));
  EXPECT_TRUE(a.Finalize() == b.Finalize());
}

TEST(StreamingHistogram, BinsByPowerOfTwoWidthAndGrowsByMergingPairs) {
  StreamingHistogram h(4);  // 16 bins per sign
  const std::vector<float> a = {0.5f, -0.25f, 0.0f};
  h.Observe(FloatSpan(a));
  // max |x| = 0.5 -> R = 1 (smallest power of two > 0.5), w = 1/16.
  EXPECT_EQ(h.range_exp(), 0);
  EXPECT_EQ(h.bin_width(), 1.0 / 16);
  EXPECT_EQ(h.positive()[8], 1);
  EXPECT_EQ(h.negative()[4], 1);
  EXPECT_EQ(h.zero_count(), 1);
  const std::vector<float> b = {3.0f, kNaN};
  h.Observe(FloatSpan(b));
  // R = 4, w = 1/4: 0.5 -> bin 2, 0.25 -> bin 1, 3 -> bin 12.
  EXPECT_EQ(h.range_exp(), 2);
  EXPECT_EQ(h.positive()[2], 1);
  EXPECT_EQ(h.negative()[1], 1);
  EXPECT_EQ(h.positive()[12], 1);
  EXPECT_EQ(h.nonfinite_count(), 1);
  EXPECT_EQ(h.binned_count(), 4);
}

TEST(StreamingHistogram, PowerOfTwoMaximumOpensTheNextRange) {
  StreamingHistogram h(4);
  const std::vector<float> v = {1.0f};
  h.Observe(FloatSpan(v));
  EXPECT_EQ(h.range_exp(), 1);  // 1.0 must be < R
  EXPECT_EQ(h.positive()[8], 1);
}

TEST(StreamingHistogram, SubnormalsAndHugeValuesAreBinned) {
  StreamingHistogram h(6);
  const std::vector<float> v = {std::numeric_limits<float>::denorm_min(),
                                std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::min()};
  h.Observe(FloatSpan(v));
  EXPECT_EQ(h.range_exp(), kMaxRangeExp);
  EXPECT_EQ(h.binned_count(), 3);
  EXPECT_EQ(h.positive()[0], 1);
  EXPECT_EQ(h.positive()[63], 1);
  EXPECT_EQ(h.negative()[0], 1);
}

TEST(StreamingHistogram, FromPartsRejectsInconsistentParts) {
  EXPECT_FALSE(StreamingHistogram::FromParts(2, true, 0, {}, {}, 0, 0).ok());
  EXPECT_FALSE(StreamingHistogram::FromParts(4, true, 0, std::vector<int64_t>(15),
                                             std::vector<int64_t>(16), 0, 0)
                   .ok());
  EXPECT_FALSE(StreamingHistogram::FromParts(4, true, 999, std::vector<int64_t>(16),
                                             std::vector<int64_t>(16), 0, 0)
                   .ok());
  std::vector<int64_t> neg(16, 0);
  neg[3] = -1;
  EXPECT_FALSE(StreamingHistogram::FromParts(4, true, 0, std::vector<int64_t>(16), neg, 0, 0).ok());
  EXPECT_TRUE(StreamingHistogram::FromParts(4, true, 0, std::vector<int64_t>(16),
                                            std::vector<int64_t>(16), 0, 0)
                  .ok());
}

std::vector<float> RandomData(std::mt19937* rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 99), expo(-30, 30);
  std::vector<float> v(n);
  for (float& x : v) {
    const int k = kind(*rng);
    if (k == 0)
      x = 0.0f;
    else if (k == 1)
      x = -0.0f;
    else if (k == 2)
      x = kNaN;
    else if (k == 3)
      x = (*rng)() % 2 ? kInf : -kInf;
    else if (k == 4)
      x = std::numeric_limits<float>::denorm_min() * static_cast<float>((*rng)() % 1000);
    else
      x = std::ldexp(normal(*rng), k < 10 ? expo(*rng) : 0);
  }
  return v;
}

struct Collected {
  StreamingHistogram hist{10};
  RangeCollector range;
  void Observe(FloatSpan s) {
    hist.Observe(s);
    range.Observe(s);
  }
  void Merge(const Collected& o) {
    hist.Merge(o.hist);
    range.Merge(o.range);
  }
  bool operator==(const Collected& o) const {
    return hist == o.hist && range.Finalize() == o.range.Finalize();
  }
};

// Random cut points splitting [0, n) into batches.
std::vector<std::pair<size_t, size_t>> RandomBatches(std::mt19937* rng, size_t n) {
  std::vector<std::pair<size_t, size_t>> batches;
  size_t pos = 0;
  while (pos < n) {
    const size_t len = std::min(n - pos, static_cast<size_t>(1 + (*rng)() % 700));
    batches.emplace_back(pos, len);
    pos += len;
  }
  return batches;
}

TEST(StreamingHistogram, PartitionInvariantUnderSplitsOrdersAndShardMerges) {
  std::mt19937 rng(Seed());
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> data = RandomData(&rng, 1 + rng() % 5000);
    const FloatSpan all(data);
    Collected one_shot;
    one_shot.Observe(all);

    auto batches = RandomBatches(&rng, data.size());
    std::shuffle(batches.begin(), batches.end(), rng);
    Collected streamed;
    for (auto [off, len] : batches) streamed.Observe(all.subspan(off, len));
    ASSERT_TRUE(streamed == one_shot)
        << "trial " << trial << ": batch order/size changed the result";

    // Shards observe disjoint batches, then merge in a random order (a random merge tree).
    const size_t shards = 1 + rng() % 6;
    std::vector<Collected> parts(shards);
    for (auto [off, len] : batches) parts[rng() % shards].Observe(all.subspan(off, len));
    while (parts.size() > 1) {
      const size_t i = rng() % parts.size();
      size_t j = rng() % (parts.size() - 1);
      if (j >= i) ++j;
      parts[i].Merge(parts[j]);
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(j));
    }
    ASSERT_TRUE(parts[0] == one_shot) << "trial " << trial << ": sharding changed the result";

    // Downstream numbers are therefore identical too.
    const float amax = one_shot.range.Finalize().amax;
    if (amax > 0) {
      const Histogram a = one_shot.hist.RebinAbs(kDefaultNumBins, amax);
      const Histogram b = parts[0].hist.RebinAbs(kDefaultNumBins, amax);
      EXPECT_EQ(a.counts, b.counts);
    }
  }
}

// Re-binning the streaming histogram vs the one-shot reference histogram. TV2 (amax 20) has
// reference edges k·20/2048 = 5k/512, multiples of the fine width 1/512, so nothing moves; the
// scaled copy (x · 0.123, amax 2.46) has edges that cut fine bins and shows the approximation.
class Rebin : public ::testing::TestWithParam<float> {};

TEST_P(Rebin, Tv2ResultsAreCloseToTheReferenceHistogramResults) {
  const std::string dir = tv::Dir();
  ASSERT_FALSE(dir.empty());
  std::vector<float> data = testing::LoadF32(dir + "/tv2.f32le.bin");
  ASSERT_EQ(data.size(), 100000u);
  for (float& x : data) x *= GetParam();
  std::printf("TV2 x %g:\n", GetParam());
  StreamingHistogram sh;
  RangeCollector rc;
  for (size_t off = 0; off < data.size(); off += 25000) {  // the 4-batch stream of TV2
    sh.Observe(FloatSpan(data.data() + off, 25000));
    rc.Observe(FloatSpan(data.data() + off, 25000));
  }
  const Histogram rebinned = sh.RebinAbs(kDefaultNumBins, rc.Finalize().amax);
  const Histogram reference = PqAbsHistogram(FloatSpan(data), kDefaultNumBins);
  EXPECT_EQ(rebinned.edges, reference.edges);  // data contain 0, so both span [0, 20]
  EXPECT_EQ(rebinned.Total(), reference.Total());
  int64_t moved = 0;
  for (size_t k = 0; k < reference.counts.size(); ++k) {
    moved += std::abs(rebinned.counts[k] - reference.counts[k]);
  }
  std::printf("TV2 rebin: %lld of %lld counts in another bin (L1/2)\n",
              static_cast<long long>(moved / 2), static_cast<long long>(reference.Total()));
  auto compare = [&](const char* what, float got, float want) {
    std::printf("TV2 %-16s rebinned %.9g  reference %.9g  rel %.2e\n", what, got, want,
                std::fabs(got - want) / want);
    EXPECT_NEAR(got, want, testing::kRebinThresholdRelative * want) << what;
  };
  compare("entropy", EntropyAmax(rebinned, {})->amax, EntropyAmax(reference, {})->amax);
  PercentileOptions p;
  p.percentile = 99.99;
  compare("percentile 99.99", PercentileAmax(rebinned, p)->amax,
          PercentileAmax(reference, p)->amax);
  p.percentile = 99.9;
  compare("percentile 99.9", PercentileAmax(rebinned, p)->amax, PercentileAmax(reference, p)->amax);
  compare("mse", MseAmax(rebinned, {})->amax, MseAmax(reference, {})->amax);
  // Signed re-binning for onnxruntime's entropy.
  const Histogram srebin = sh.RebinSigned(2048, rc.Finalize().amax);
  Histogram sref = SignedSymmetricHistogram(FloatSpan(data), 2048);
  Histogram s2 = srebin;
  s2.observed_min = sref.observed_min;
  s2.observed_max = sref.observed_max;
  compare("ort entropy", OrtEntropyRange(s2, {2048 / 16, KlPrecision::kFloat32})->amax,
          OrtEntropyRange(sref, {2048 / 16, KlPrecision::kFloat32})->amax);
}

INSTANTIATE_TEST_SUITE_P(Scales, Rebin, ::testing::Values(1.0f, 0.123f));

TEST(PerChannelAbsMax, ReducesEveryAxisButOne) {
  // dims {2, 3}: rows 0 and 1.
  const std::vector<float> v = {1, -5, 2, -3, 4, kNaN};
  PerChannelAbsMaxCollector c0(0), c1(1), cm1(-1);
  const TensorView t{FloatSpan(v), {2, 3}};
  ASSERT_TRUE(c0.Observe(t).ok());
  ASSERT_TRUE(c1.Observe(t).ok());
  ASSERT_TRUE(cm1.Observe(t).ok());
  EXPECT_EQ(c0.Finalize().amax, (std::vector<float>{5, 4}));
  EXPECT_EQ(c1.Finalize().amax, (std::vector<float>{3, 5, 2}));
  EXPECT_EQ(c1.Finalize().nonfinite_count, 1);
  EXPECT_TRUE(cm1.Finalize() == c1.Finalize());
}

TEST(PerChannelAbsMax, MergeAndErrors) {
  const std::vector<float> a = {1, -2, 3, -4}, b = {-8, 1, 0, 0};
  PerChannelAbsMaxCollector x(1), y(1), all(1);
  ASSERT_TRUE(x.Observe({FloatSpan(a), {2, 2}}).ok());
  ASSERT_TRUE(y.Observe({FloatSpan(b), {2, 2}}).ok());
  ASSERT_TRUE(all.Observe({FloatSpan(a), {2, 2}}).ok());
  ASSERT_TRUE(all.Observe({FloatSpan(b), {2, 2}}).ok());
  ASSERT_TRUE(y.Merge(x).ok());
  EXPECT_TRUE(y.Finalize() == all.Finalize());
  EXPECT_EQ(all.Finalize().amax, (std::vector<float>{8, 4}));
  EXPECT_FALSE(x.Observe({FloatSpan(a), {4, 1}}).ok());  // 1 channel, earlier 2
  EXPECT_FALSE(x.Observe({FloatSpan(a), {2}}).ok());     // rank 1, axis 1
  EXPECT_FALSE(x.Observe({FloatSpan(a), {2, 3}}).ok());  // 6 != 4 values
}

// --- the vectorised, threaded scans (quant/collectors/scan.h) against a scalar oracle ---

// Finite data of several shapes: mixed magnitudes with ±0 and subnormals, ReLU output (half
// zeros), and a range of subnormals only (bin scale 2^(L-e) beyond float: the double path).
std::vector<float> FiniteData(std::mt19937* rng, size_t n, int kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99), expo(-40, 40);
  std::vector<float> v(n);
  for (float& x : v) {
    const int k = pick(*rng);
    if (kind == 1) {
      x = std::max(normal(*rng), 0.0f);
    } else if (kind == 2) {
      x = std::numeric_limits<float>::denorm_min() *
          static_cast<float>(static_cast<int>((*rng)() % 2001) - 1000);
    } else if (k == 0) {
      x = 0.0f;
    } else if (k == 1) {
      x = -0.0f;
    } else if (k == 2) {
      x = std::numeric_limits<float>::denorm_min() * static_cast<float>((*rng)() % 1000);
    } else {
      x = std::ldexp(normal(*rng), k < 10 ? expo(*rng) : 0);
    }
  }
  return v;
}

// The policy of docs/histogram-policy.md computed value by value in double, over all values a
// collector saw (NaN/Inf counted apart), and the range statistics the same way.
struct Oracle {
  std::vector<int64_t> pos, neg;
  int64_t zeros = 0, nonfinite = 0;
  int range_exp = 0;
  float amax = 0.0f, min = kInf, max = -kInf;

  Oracle(const std::vector<float>& data, int log2_bins)
      : pos(size_t{1} << log2_bins), neg(size_t{1} << log2_bins) {
    for (float x : data) {
      if (!std::isfinite(x)) continue;
      amax = std::max(amax, std::fabs(x));
      min = std::min(min, x);
      max = std::max(max, x);
      zeros += x == 0.0f;
    }
    std::frexp(amax, &range_exp);
    range_exp = std::max(range_exp, kMinRangeExp);
    for (float x : data) {
      if (!std::isfinite(x)) {
        ++nonfinite;
        continue;
      }
      const auto k = static_cast<size_t>(
          std::floor(std::fabs(static_cast<double>(x)) * std::ldexp(1.0, log2_bins - range_exp)));
      if (x > 0) ++pos[k];
      if (x < 0) ++neg[k];
    }
  }

  void Expect(const StreamingHistogram& h, const RangeStats& s, size_t count,
              const std::string& where) const {
    if (amax > 0) {
      EXPECT_EQ(h.range_exp(), range_exp) << where;
    }
    EXPECT_EQ(h.positive(), pos) << where;
    EXPECT_EQ(h.negative(), neg) << where;
    EXPECT_EQ(h.zero_count(), zeros) << where;
    EXPECT_EQ(h.nonfinite_count(), nonfinite) << where;
    EXPECT_EQ(s.zero_count, zeros) << where;
    EXPECT_EQ(s.min, min == 0.0f ? 0.0f : min) << where;
    EXPECT_EQ(s.max, max == 0.0f ? 0.0f : max) << where;
    EXPECT_EQ(s.count, static_cast<int64_t>(count)) << where;
    EXPECT_EQ(s.nan_count + s.posinf_count + s.neginf_count, nonfinite) << where;
  }
};

TEST(CollectorScans, ThreadedScansMatchAScalarOracleAtEveryThreadCount) {
  std::mt19937 rng(Seed());
  constexpr int kLog2Bins = 10;
  for (int kind = 0; kind < 3; ++kind) {
    // Above the parallel threshold (threads split it) and below it (one thread, direct bins).
    for (size_t n : {size_t{1} << 18 | 13, size_t{999}}) {
      const std::vector<float> data = FiniteData(&rng, n, kind);
      const Oracle oracle(data, kLog2Bins);
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        StreamingHistogram h(kLog2Bins);
        RangeCollector r;
        h.Observe(FloatSpan(data));
        r.Observe(FloatSpan(data));
        oracle.Expect(h, r.Finalize(), n, fmt::format("kind {} n {} threads {}", kind, n, threads));
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

// TensorCollector's one pass (scan::SummarizeAndBin: bin at the current range while summarising,
// stop a thread's share at the first block that widens the range or holds NaN/Inf, grow, bin the
// rest) against the oracle, on batches that stop it at the start, in the middle and at the end of
// every thread's share, for large (threaded) and small (direct) tensors. Without the exact
// growth of the already binned part, or with a stopped block counted twice or not at all, the
// counts would differ.
TEST(CollectorScans, OnePassCollectorMatchesTheOracleWhenABatchWidensTheRange) {
  std::mt19937 rng(Seed());
  constexpr int kLog2Bins = 10;
  for (size_t n : {size_t{1} << 18 | 13, size_t{999}}) {
    // Batch 0 sets a small range; batches 1-3 each widen it at one position; batch 4 holds NaN and
    // ±Inf; batch 5 fits (the steady state); batch 6 has only zeros and a subnormal.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::vector<float>> batches;
    for (int b = 0; b < 6; ++b) {
      std::vector<float> v(n);
      for (float& x : v)
        x = rng() % 10 == 0 ? 0.0f : std::ldexp(normal(rng), -8);  // |x| < 2^-4 or so
      batches.push_back(std::move(v));
    }
    batches[1][0] = 1e3f;           // first block
    batches[2][n / 2 + 7] = -3e4f;  // the middle: inside the second thread's share
    batches[3][n - 1] = 7e5f;       // the last block
    batches[3][n / 3] = -6e5f;      // and inside the first (or second of three) share
    batches[4][n / 4] = kNaN;
    batches[4][n - 3] = kInf;
    batches[4][1] = -kInf;
    batches[4][n / 2] = 2e6f;  // widens the range in the same batch as the NaN
    batches.push_back(std::vector<float>(n, 0.0f));
    batches.back()[n / 5] = std::numeric_limits<float>::denorm_min();
    std::vector<float> all;
    for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
    const Oracle oracle(all, kLog2Bins);
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      TensorCollector c(kLog2Bins);
      for (const auto& b : batches)
        ASSERT_TRUE(c.Observe({FloatSpan(b), {static_cast<int64_t>(n)}}).ok());
      oracle.Expect(c.histogram(), c.range(), all.size(),
                    fmt::format("n {} threads {}", n, threads));
      // And the two-pass path (range and histogram scanning separately) agrees bit for bit.
      Collected separate;
      for (const auto& b : batches) separate.Observe(FloatSpan(b));
      EXPECT_TRUE(separate.hist == c.histogram()) << "threads " << threads;
      EXPECT_TRUE(separate.range.Finalize() == c.range()) << "threads " << threads;
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(CollectorScans, ThreadedOneShotEqualsSingleThreadedBatches) {
  std::mt19937 rng(Seed());
  const std::vector<float> data = FiniteData(&rng, (size_t{1} << 19) + 77, 0);
  omp_set_num_threads(3);
  Collected one_shot;
  one_shot.Observe(FloatSpan(data));
  omp_set_num_threads(1);
  Collected streamed;
  for (auto [off, len] : RandomBatches(&rng, data.size()))
    streamed.Observe(FloatSpan(data).subspan(off, len));
  EXPECT_TRUE(streamed == one_shot);
  omp_set_num_threads(omp_get_num_procs());
}

TEST(TensorCollector, RangeOnlyServesMaxAndRefusesHistogramMethods) {
  const std::vector<float> v = {-3.0f, 0.5f, 2.0f, 0.0f};
  const TensorView view{FloatSpan(v), {4}};
  TensorCollector fast = TensorCollector::RangeOnly();
  TensorCollector full;
  ASSERT_TRUE(fast.Observe(view).ok());
  ASSERT_TRUE(full.Observe(view).ok());
  EXPECT_FALSE(fast.has_histogram());
  EXPECT_TRUE(full.has_histogram());
  EXPECT_EQ(fast.range(), full.range());
  auto max = AmaxFromCollector(fast, {CalibMethod::kMax});
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->amax, 3.0f);
  auto entropy = AmaxFromCollector(fast, {CalibMethod::kEntropy});
  ASSERT_FALSE(entropy.ok());
  EXPECT_NE(entropy.status().message().find("needs a histogram"), std::string::npos);
  EXPECT_FALSE(full.Merge(fast).ok());
}

}  // namespace
}  // namespace quantkit::quant
