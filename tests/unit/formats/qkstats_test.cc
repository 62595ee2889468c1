#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "formats/qkstats.h"
#include "quant/calibrators/calibrators.h"

namespace quantkit::formats {
namespace {

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/qkstats_test_" + name + ".qkstats";
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<float> Data(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  v[n / 2] = 0.0f;
  v[n / 3] = std::numeric_limits<float>::infinity();
  return v;
}

// Collects `data` for tensors "act" (per tensor) and "w" (per channel: dims {n/4, 4}, axis 1, so
// batches split along axis 0 keep every value in its channel).
void Collect(StatsFile* s, const std::vector<float>& data) {
  auto& act = s->tensors.try_emplace("act", s->histogram_log2_bins).first->second;
  ASSERT_TRUE(act.Observe({quant::FloatSpan(data), {static_cast<int64_t>(data.size())}}).ok());
  auto& w = s->tensors.try_emplace("w", s->histogram_log2_bins, int64_t{1}).first->second;
  ASSERT_TRUE(w.Observe({quant::FloatSpan(data), {static_cast<int64_t>(data.size() / 4), 4}}).ok());
}

TEST(QkStats, RoundTripsExactly) {
  StatsFile s;
  s.model_sha256 = kHashA;
  Collect(&s, Data(1, 4000));
  const std::string path = TempPath("roundtrip");
  ASSERT_TRUE(WriteStatsFile(path, s).ok());
  auto back = ReadStatsFile(path, kHashA);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_TRUE(back->tensors.at("act") == s.tensors.at("act"));
  EXPECT_TRUE(back->tensors.at("w") == s.tensors.at("w"));
  EXPECT_TRUE(SerializeStats(*back) == Slurp(path));
  std::remove(path.c_str());
}

TEST(QkStats, MergingFilesEqualsOnePassOverAllData) {
  const std::vector<float> all = Data(7, 12000);
  StatsFile one;
  one.model_sha256 = kHashA;
  Collect(&one, all);
  std::vector<std::string> paths;
  for (int part = 0; part < 3; ++part) {
    StatsFile s;
    s.model_sha256 = kHashA;
    Collect(&s, std::vector<float>(all.begin() + part * 4000, all.begin() + (part + 1) * 4000));
    paths.push_back(TempPath("part" + std::to_string(part)));
    ASSERT_TRUE(WriteStatsFile(paths.back(), s).ok());
  }
  std::swap(paths[0], paths[2]);  // merge order does not matter
  auto merged = MergeStatsFiles(paths, kHashA);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  const std::string a = SerializeStats(*merged), b = SerializeStats(one);
  if (a != b) {  // write both out for diffing (gtest's own diff is quadratic on long strings)
    std::ofstream(TempPath("merged_dump")) << a;
    std::ofstream(TempPath("onepass_dump")) << b;
  }
  EXPECT_TRUE(a == b) << "merged != one pass; see " << TempPath("merged_dump");
  // And the calibrators see identical inputs.
  const auto& t = merged->tensors.at("act");
  const auto h = t.histogram().RebinAbs(quant::kDefaultNumBins, t.range().amax);
  const auto h1 =
      one.tensors.at("act").histogram().RebinAbs(quant::kDefaultNumBins, t.range().amax);
  EXPECT_EQ(quant::EntropyAmax(h, {})->amax, quant::EntropyAmax(h1, {})->amax);
  for (const auto& p : paths) std::remove(p.c_str());
}

TEST(QkStats, RejectsMismatchedAndCorruptFilesNamingTheFile) {
  StatsFile s;
  s.model_sha256 = kHashA;
  Collect(&s, Data(3, 400));
  const std::string text = SerializeStats(s);
  auto reject = [&](const std::string& bad, const std::string& needle,
                    const std::string& hash = "") {
    auto r = ParseStats(bad, "x.qkstats", hash);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().message().rfind("x.qkstats: ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  reject(text, "not for this model", kHashB);
  auto replace = [&](std::string from, std::string to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  reject(replace("\"version\": 1", "\"version\": 2"), "version 2");
  reject(replace("\"format\": \"quantkit.qkstats\"", "\"format\": \"other\""), "not a quantkit");
  reject(replace("\"zeros\"", "\"zeroes\""), "unknown key 'zeroes'");
  reject(replace("\"log2_bins\": 14", "\"log2_bins\": 40"), "log2_bins");
  reject(replace("\"count\": 400", "\"count\": 401"), "range.count");
  reject(replace("\"model_sha256\": \"a", "\"model_sha256\": \"A"), "model_sha256");
  // Every truncation is rejected (not crashed on, not accepted).
  for (size_t cut = 0; cut + 2 < text.size(); cut += 97) {
    EXPECT_FALSE(ParseStats(text.substr(0, cut), "x.qkstats").ok()) << cut;
  }
  auto missing = ReadStatsFile(TempPath("does_not_exist"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does_not_exist"), std::string::npos);
}

// Issue #48: values that read as another scale or an impossible range are refused, not taken.
TEST(QkStats, RejectsImpossibleRangesAndExponents) {
  StatsFile s;
  s.model_sha256 = kHashA;
  Collect(&s, Data(3, 400));
  const std::string text = SerializeStats(s);
  auto reject = [&](const std::string& bad, const std::string& needle) {
    auto r = ParseStats(bad, "x.qkstats", "");
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  // The value after `key` (its first occurrence) replaced by `to`.
  auto with = [&](const std::string& key, const std::string& to) {
    std::string t = text;
    const size_t at = t.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key;
    if (at == std::string::npos) return t;
    const size_t begin = at + key.size() + 4, end = t.find_first_of(",\n}", begin);
    return t.replace(begin, end - begin, to);
  };
  reject(with("range_exp", "1099511627776"),
         "range_exp 1099511627776 out of range");  // 2^40: int wraps to 0
  reject(with("range_exp", "-200"), "range_exp");
  reject(with("amax", "-1.5"), "range is inconsistent");
  reject(with("min", "100"), "range is inconsistent");  // min > max
  // The unedited text reads back.
  ASSERT_TRUE(ParseStats(text, "x.qkstats", "").ok());
}

TEST(QkStats, MergedCountsNeverWrap) {
  quant::RangeStats big;
  big.count = std::numeric_limits<int64_t>::max() - 10;
  big.zero_count = 0;
  big.min = -1.0f, big.max = 2.0f, big.amax = 2.0f;
  ASSERT_TRUE(big.Consistent());
  quant::TensorCollector a = quant::TensorCollector::RangeOnly(big),
                         b = quant::TensorCollector::RangeOnly(big);
  const Status merged = a.Merge(b);
  ASSERT_FALSE(merged.ok()) << "a count past INT64_MAX wrapped";
  EXPECT_NE(merged.message().find("more than"), std::string::npos) << merged.message();
  EXPECT_EQ(a.range().count, big.count) << "a refused merge changed the statistics";
}

TEST(QkStats, MergeRejectsOtherModelsAndResolutions) {
  StatsFile a, b, c;
  a.model_sha256 = kHashA;
  b.model_sha256 = kHashB;
  c.model_sha256 = kHashA;
  c.histogram_log2_bins = 10;
  EXPECT_FALSE(MergeStats(&a, b).ok());
  EXPECT_FALSE(MergeStats(&a, c).ok());
  const std::string pa = TempPath("ma"), pb = TempPath("mb");
  ASSERT_TRUE(WriteStatsFile(pa, a).ok());
  ASSERT_TRUE(WriteStatsFile(pb, b).ok());
  auto r = MergeStatsFiles({pa, pb});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(pb), std::string::npos) << r.status().message();
  std::remove(pa.c_str());
  std::remove(pb.c_str());
}

TEST(QkStats, WriteFailsCleanlyForAnUnwritableDirectory) {
  StatsFile s;
  s.model_sha256 = kHashA;
  auto st = WriteStatsFile("/nonexistent-dir/x.qkstats", s);
  ASSERT_FALSE(st.ok());
  // common/file_util reports a missing directory as kNotFound (exit code 2: a path the user
  // gave is wrong), other write failures as kIoError.
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent-dir/x.qkstats"), std::string::npos);
}

}  // namespace
}  // namespace quantkit::formats
