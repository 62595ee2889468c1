// Unit tests of diagnose's statistics and input checks (no model run): each builds the defect
// on purpose and asserts the finding code, and a well-formed counterpart that gets none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/byte_io.h"
#include "pipelines/diagnose/collection.h"
#include "pipelines/diagnose/inputs.h"
#include "pipelines/diagnose/stats.h"
#include "testing/tolerances.h"

namespace quantkit::pipelines {
namespace {

bool Has(const std::vector<Finding>& f, const std::string& code) {
  return std::any_of(f.begin(), f.end(), [&](const Finding& x) { return x.code == code; });
}

// Smooth "images" [n, c, h, w]: a per-channel offset plus a random low-frequency pattern, so
// adjacent pixels correlate like natural images and channel means differ.
std::vector<float> SmoothImages(int n, int c, int h, int w, uint32_t seed,
                                std::vector<float> offsets) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * c * h * w));
  for (int s = 0; s < n; ++s) {
    const float fx = 0.1f + 0.3f * u(rng), fy = 0.1f + 0.3f * u(rng), ph = 6.0f * u(rng);
    for (int ch = 0; ch < c; ++ch) {
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          v[static_cast<size_t>(((s * c + ch) * h + y) * w + x)] =
              offsets[static_cast<size_t>(ch)] + 0.1f * std::sin(fx * x + fy * y + ph);
        }
      }
    }
  }
  return v;
}

InputStats StatsOf(const std::vector<float>& v, std::vector<int64_t> dims) {
  InputStatsAccumulator acc("x");
  EXPECT_TRUE(acc.Add(ir::Tensor::FromVector(ir::DType::kFloat, dims, v)).ok());
  return acc.Finalize();
}

TEST(DiagnoseStats, QuantileAndRobustZ) {
  EXPECT_DOUBLE_EQ(Quantile({4, 1, 3, 2}, 0.5), 2.5);  // numpy.quantile([1,2,3,4], 0.5)
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4}, 1.0), 4.0);
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(i % 10);
  v.push_back(1000);
  const std::vector<double> z = RobustZ(v);
  EXPECT_GT(z.back(), 6.0);
  for (size_t i = 0; i + 1 < z.size(); ++i) EXPECT_LT(std::fabs(z[i]), 3.0) << i;
  EXPECT_NEAR(CoefficientOfVariation({1, 1, 1}), 0.0, 0.0);
  EXPECT_GT(CoefficientOfVariation({1, 2, 3}), 0.3);
}

TEST(DiagnoseStats, ShareAboveAndJensenShannon) {
  std::vector<float> x;
  for (int i = 0; i < 10000; ++i) x.push_back(static_cast<float>(i) / 10000.0f);
  quant::StreamingHistogram h;
  h.Observe(quant::FloatSpan(x));
  EXPECT_NEAR(quant::ShareAbove(h, 0.9), 0.1, testing::kShareAboveAbs);
  EXPECT_NEAR(quant::ShareAbove(h, 2.0), 0.0, 0.0);
  EXPECT_NEAR(JensenShannonBits(h, 1.0f, h, 1.0f), 0.0, testing::kJsIdenticalAbs);
  std::vector<float> neg(x.size());
  std::transform(x.begin(), x.end(), neg.begin(), [](float v) { return -v - 0.5f; });
  quant::StreamingHistogram hn;
  hn.Observe(quant::FloatSpan(neg));
  EXPECT_GT(JensenShannonBits(h, 1.0f, hn, 1.5f), 0.95);  // disjoint supports: ~1 bit
}

TEST(DiagnoseInputs, CleanImagesHaveNoFindings) {
  const InputStats s = StatsOf(SmoothImages(32, 3, 16, 16, 1, {0.2f, 0.5f, 0.8f}), {32, 3, 16, 16});
  EXPECT_EQ(s.scale, "0-1");
  EXPECT_EQ(s.channel_axis, 0);
  EXPECT_EQ(s.channel_mean.size(), 3u);
  std::vector<Finding> f;
  CheckInputSet(s, "calibration", &f);
  CompareInputSets(s, "calibration", s, "reference", &f);
  EXPECT_TRUE(f.empty()) << f.front().code << ": " << f.front().message;
}

TEST(DiagnoseInputs, RandomConstantDuplicatedSamples) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> noise(16 * 3 * 16 * 16);
  for (float& v : noise) v = u(rng);
  std::vector<Finding> f;
  const InputStats n = StatsOf(noise, {16, 3, 16, 16});
  CheckInputSet(n, "calibration", &f);
  ASSERT_TRUE(Has(f, "random_data"));
  EXPECT_NE(f.front().message.find("uniform noise"), std::string::npos) << f.front().message;

  std::vector<float> imgs = SmoothImages(8, 1, 16, 16, 2, {0.5f});
  std::fill(imgs.begin(), imgs.begin() + 256, 0.25f);                     // sample 0 constant
  std::copy(imgs.begin() + 256, imgs.begin() + 512, imgs.begin() + 512);  // sample 2 = sample 1
  f.clear();
  const InputStats s = StatsOf(imgs, {8, 1, 16, 16});
  EXPECT_EQ(s.constant_samples, 1);
  EXPECT_EQ(s.duplicate_samples, 1);
  CheckInputSet(s, "calibration", &f);
  EXPECT_TRUE(Has(f, "constant_samples"));
  EXPECT_TRUE(Has(f, "duplicate_samples"));
  EXPECT_FALSE(Has(f, "random_data"));
}

// Audio [N, 512]: uncorrelated-looking values and silent (all-zero) clips are normal there; the
// image checks (random_data, blank loads) must not fire on a non-image input (issue 20).
TEST(DiagnoseInputs, ImageChecksStayOffNonImageInputs) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 0.1f);
  std::vector<float> audio(16 * 512);
  for (float& v : audio) v = g(rng);
  std::fill(audio.begin(), audio.begin() + 512, 0.0f);  // one silent clip
  std::vector<Finding> f;
  const InputStats s = StatsOf(audio, {16, 512});
  CheckInputSet(s, "calibration", &f);
  EXPECT_FALSE(Has(f, "random_data"));
  ASSERT_TRUE(Has(f, "constant_samples"));
  for (const Finding& x : f) {
    if (x.code == "constant_samples") {
      EXPECT_EQ(x.severity, "info");
      EXPECT_EQ(x.message.find("blank"), std::string::npos) << x.message;
    }
  }
}

TEST(DiagnoseInputs, LayoutSwapped) {
  // Build NHWC images and reinterpret their bytes as NCHW (reshape instead of transpose).
  const std::vector<float> nchw = SmoothImages(8, 3, 16, 16, 4, {0.1f, 0.5f, 0.9f});
  std::vector<float> nhwc(nchw.size());
  for (int s = 0; s < 8; ++s)
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 256; ++p)
        nhwc[static_cast<size_t>((s * 256 + p) * 3 + c)] =
            nchw[static_cast<size_t>((s * 3 + c) * 256 + p)];
  std::vector<Finding> f;
  CheckInputSet(StatsOf(nhwc, {8, 3, 16, 16}), "calibration", &f);
  EXPECT_TRUE(Has(f, "layout_swapped"));
  f.clear();
  CheckInputSet(StatsOf(nchw, {8, 3, 16, 16}), "calibration", &f);
  EXPECT_FALSE(Has(f, "layout_swapped"));
}

TEST(DiagnoseInputs, ScaleShiftAndChannelOrder) {
  const std::vector<float> ref = SmoothImages(16, 3, 16, 16, 5, {0.2f, 0.5f, 0.8f});
  const InputStats r = StatsOf(ref, {16, 3, 16, 16});
  auto compare = [&](const std::vector<float>& d) {
    std::vector<Finding> f;
    CompareInputSets(StatsOf(d, {16, 3, 16, 16}), "calibration", r, "reference", &f);
    return f;
  };
  std::vector<float> x255 = ref, shifted = ref;
  for (float& v : x255) v *= 255.0f;
  for (float& v : shifted) v += 1.0f;
  auto f = compare(x255);
  ASSERT_TRUE(Has(f, "scale_mismatch"));
  EXPECT_NE(f.front().message.find("0-255"), std::string::npos) << f.front().message;
  EXPECT_TRUE(Has(compare(shifted), "shift_mismatch"));
  const std::vector<float> bgr = SmoothImages(16, 3, 16, 16, 6, {0.8f, 0.5f, 0.2f});
  f = compare(bgr);
  EXPECT_TRUE(Has(f, "channel_order_swapped"));
  EXPECT_FALSE(Has(f, "scale_mismatch"));
}

TEST(DiagnoseInputs, Expectation) {
  auto e = ParseExpectation("range=0:1");
  ASSERT_TRUE(e.ok());
  std::vector<float> x = SmoothImages(8, 1, 16, 16, 7, {0.5f});
  for (float& v : x) v *= 255.0f;
  std::vector<Finding> f;
  CheckExpectation(StatsOf(x, {8, 1, 16, 16}), "calibration", *e, &f);
  ASSERT_TRUE(Has(f, "expectation_mismatch"));
  EXPECT_NE(f.front().message.find("0-255 data for a 0-1 model"), std::string::npos)
      << f.front().message;
  auto ms = ParseExpectation("mean=0.2/0.5/0.8,std=0.07/0.07/0.07");
  ASSERT_TRUE(ms.ok());
  f.clear();
  CheckExpectation(StatsOf(SmoothImages(16, 3, 16, 16, 8, {0.8f, 0.5f, 0.2f}), {16, 3, 16, 16}),
                   "calibration", *ms, &f);
  EXPECT_TRUE(Has(f, "channel_order_swapped"));
  EXPECT_FALSE(ParseExpectation("range=1:0").ok());
  EXPECT_FALSE(ParseExpectation("mean=a").ok());
  EXPECT_FALSE(ParseExpectation("gamma=2").ok());
  EXPECT_FALSE(ParseExpectation("mean=1/2,std=1").ok());
}

// --- The ranks of a distributed diagnose (analysis/diagnose/collection.h) ------------------------

// Every field of two input summaries, compared bit for bit (EXPECT_EQ on doubles: no tolerance,
// the exchange must not change a single rounding).
void ExpectSameInputStats(const InputStats& a, const InputStats& b) {
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.sample_dims, b.sample_dims);
  EXPECT_EQ(a.channel_axis, b.channel_axis);
  for (auto [x, y] : {std::pair{a.mean, b.mean},
                      {a.std, b.std},
                      {a.min, b.min},
                      {a.max, b.max},
                      {a.lag1_corr, b.lag1_corr},
                      {a.kurtosis, b.kurtosis},
                      {a.lag1_absdiff, b.lag1_absdiff},
                      {a.lagc_absdiff, b.lagc_absdiff}}) {
    EXPECT_EQ(x, y);
  }
  EXPECT_EQ(a.channel_mean, b.channel_mean);
  EXPECT_EQ(a.channel_std, b.channel_std);
  EXPECT_EQ(a.constant_samples, b.constant_samples);
  EXPECT_EQ(a.duplicate_samples, b.duplicate_samples);
  EXPECT_EQ(a.sample_mean, b.sample_mean);
  EXPECT_EQ(a.sample_std, b.sample_std);
  EXPECT_EQ(a.scale, b.scale);
}

ir::Tensor Images(int n, uint32_t seed, float offset = 0.3f) {
  return ir::Tensor::FromVector(ir::DType::kFloat, {n, 3, 8, 8},
                                SmoothImages(n, 3, 8, 8, seed, {offset, 0.5f, 0.7f}));
}

// Batches split between two accumulators (two ranks), one of them sent as bytes and appended,
// give one accumulator's statistics exactly — duplicates across the split and batches of
// another shape included (that shape is left out in both).
TEST(DiagnoseExchange, InputStatisticsAppendedInOrderEqualOneAccumulator) {
  const ir::Tensor b1 = Images(4, 1), b2 = Images(3, 2),
                   b3 = Images(5, 1);  // b3 repeats b1's samples
  const ir::Tensor other =
      ir::Tensor::FromVector(ir::DType::kFloat, {2, 3, 4, 4}, std::vector<float>(96, 0.5f));
  InputStatsAccumulator one("x");
  for (const ir::Tensor* t : {&b1, &b2, &other, &b3}) ASSERT_TRUE(one.Add(*t).ok());
  InputStatsAccumulator rank0("x"), rank1("x");
  ASSERT_TRUE(rank0.Add(b1).ok());
  ASSERT_TRUE(rank0.Add(b2).ok());
  ASSERT_TRUE(rank1.Add(other).ok());
  ASSERT_TRUE(rank1.Add(b3).ok());
  ByteWriter w;
  rank1.Encode(&w);
  const std::string bytes = w.Take(), source = "rank 1";
  ByteReader r(bytes, source);
  auto decoded = InputStatsAccumulator::Decode(&r);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(r.ExpectEnd().ok());
  ASSERT_TRUE(rank0.Append(std::move(*decoded)).ok());
  const InputStats expected = one.Finalize();
  EXPECT_EQ(expected.samples, 12);           // the 2 samples of the other shape are left out
  EXPECT_EQ(expected.duplicate_samples, 4);  // b3's first 4 repeat b1
  ExpectSameInputStats(rank0.Finalize(), expected);
  // Appending another input's statistics is refused.
  EXPECT_FALSE(rank0.Append(InputStatsAccumulator("y")).ok());
}

// The sums are kept per sample and added in sample order: the batch size changes no bit (without
// it, diagnose's report would depend on --batch-size and on the ranks' shards).
TEST(DiagnoseExchange, InputStatisticsDoNotDependOnTheBatching) {
  const std::vector<float> v = SmoothImages(12, 3, 8, 8, 4, {0.1f, 0.4f, 0.9f});
  InputStatsAccumulator whole("x"), parts("x");
  ASSERT_TRUE(whole.Add(ir::Tensor::FromVector(ir::DType::kFloat, {12, 3, 8, 8}, v)).ok());
  const size_t per = 3 * 8 * 8;
  for (auto [begin, n] : {std::pair<size_t, int64_t>{0, 5}, {5, 1}, {6, 6}}) {
    std::vector<float> batch(
        v.begin() + static_cast<int64_t>(begin * per),
        v.begin() + static_cast<int64_t>((begin + static_cast<size_t>(n)) * per));
    ASSERT_TRUE(parts.Add(ir::Tensor::FromVector(ir::DType::kFloat, {n, 3, 8, 8}, batch)).ok());
  }
  ExpectSameInputStats(parts.Finalize(), whole.Finalize());
}

TEST(DiagnoseExchange, TruncatedInputStatisticsAreRefused) {
  InputStatsAccumulator acc("x");
  ASSERT_TRUE(acc.Add(Images(4, 3)).ok());
  ByteWriter w;
  acc.Encode(&w);
  const std::string bytes = w.Take(), source = "rank 2";
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 8) {
    const std::string cut = bytes.substr(0, n);
    ByteReader r(cut, source);
    auto d = InputStatsAccumulator::Decode(&r);
    ASSERT_FALSE(d.ok()) << "accepted " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(d.status().message().rfind("rank 2", 0), 0u) << d.status().message();
  }
}

// Two ranks' parts (chunks [0, 2) and [2, 3), channels, inputs, reference) combined on rank 0
// equal the part one process collects over the same batches.
TEST(DiagnoseExchange, CollectionPartsCombineToOneProcess) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.5f);
  auto values = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  };
  const std::vector<std::vector<float>> batches = {values(800), values(800), values(800)};
  const std::vector<std::vector<float>> ref_batches = {values(400), values(400)};
  auto observe = [](quant::TensorCollector& c, const std::vector<float>& v) {
    ASSERT_TRUE(c.Observe({quant::FloatSpan(v), {static_cast<int64_t>(v.size())}}).ok());
  };
  auto channel_observe = [](quant::PerChannelAbsMaxCollector& c, const std::vector<float>& v) {
    ASSERT_TRUE(c.Observe({quant::FloatSpan(v), {2, 4, 10, 10}}).ok());
  };
  auto empty = [] {
    DiagnoseCollection c;
    c.chunks.assign(3, analysis::CollectorMap{{"t", quant::TensorCollector()}});
    c.reference.emplace("t", quant::TensorCollector());
    return c;
  };
  DiagnoseCollection one = empty(), part0 = empty(), part1 = empty();
  one.first_chunk = 0, one.end_chunk = 3;
  part0.first_chunk = 0, part0.end_chunk = 2;
  part1.first_chunk = 2, part1.end_chunk = 3;
  for (int c = 0; c < 3; ++c) {
    DiagnoseCollection& part = c < 2 ? part0 : part1;
    observe(one.chunks[c].at("t"), batches[c]);
    observe(part.chunks[c].at("t"), batches[c]);
    channel_observe(one.channels.try_emplace("t", 1).first->second, batches[c]);
    channel_observe(part.channels.try_emplace("t", 1).first->second, batches[c]);
    ASSERT_TRUE(one.inputs.try_emplace("x", "x").first->second.Add(Images(2, 10 + c)).ok());
    ASSERT_TRUE(part.inputs.try_emplace("x", "x").first->second.Add(Images(2, 10 + c)).ok());
  }
  for (int b = 0; b < 2; ++b) {
    observe(one.reference.at("t"), ref_batches[b]);
    observe((b == 0 ? part0 : part1).reference.at("t"), ref_batches[b]);
  }
  DiagnoseCollection all = empty();
  ASSERT_TRUE(AppendEncodedCollection(&all, EncodeCollection(part0), "rank 0").ok());
  ASSERT_TRUE(AppendEncodedCollection(&all, EncodeCollection(part1), "rank 1").ok());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(all.chunks[c].at("t") == one.chunks[c].at("t")) << c;
  EXPECT_TRUE(all.reference.at("t") == one.reference.at("t"));
  EXPECT_EQ(all.channels.at("t").Finalize(), one.channels.at("t").Finalize());
  ExpectSameInputStats(all.inputs.at("x").Finalize(), one.inputs.at("x").Finalize());
  // A part that does not follow the chunks already there (rank 1's twice) is refused by name.
  auto again = AppendEncodedCollection(&all, EncodeCollection(part1), "rank 2");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("rank 2: chunks [2, 3) of 3 do not follow"), std::string::npos)
      << again.message();
}

}  // namespace
}  // namespace quantkit::pipelines
