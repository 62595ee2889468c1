// The binary statistics the ranks of a distributed run exchange (formats/qkstats_wire.h): exact
// round trips, equal to the JSON .qkstats after a merge, and hostile bytes refused with an error
// naming the sender — never a crash, a huge allocation or silently wrong statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "formats/qkstats.h"
#include "formats/qkstats_wire.h"

namespace quantkit::formats {
namespace {

const std::string kHash(64, 'c');

StatsFile Make(uint32_t seed) {
  StatsFile s;
  s.model_sha256 = kHash;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(5000);
  for (float& x : v) x = d(rng);
  v[7] = 0.0f, v[8] = -0.0f, v[9] = std::numeric_limits<float>::infinity();
  v[10] = std::numeric_limits<float>::quiet_NaN(), v[11] = 1e-40f;  // a subnormal
  auto& act = s.tensors.try_emplace("act", s.histogram_log2_bins).first->second;
  EXPECT_TRUE(act.Observe({quant::FloatSpan(v), {static_cast<int64_t>(v.size())}}).ok());
  auto& w = s.tensors.try_emplace("conv/w", s.histogram_log2_bins, int64_t{1}).first->second;
  EXPECT_TRUE(w.Observe({quant::FloatSpan(v), {static_cast<int64_t>(v.size() / 5), 5}}).ok());
  s.tensors.try_emplace("never_seen", s.histogram_log2_bins);  // empty histogram, no range
  return s;
}

TEST(QkStatsWire, RoundTripsExactly) {
  const StatsFile s = Make(1);
  const std::string bytes = EncodeStatsWire(s);
  auto back = DecodeStatsWire(bytes, "rank 1", kHash);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tensors.size(), 3u);
  for (const auto& [name, t] : s.tensors) EXPECT_TRUE(back->tensors.at(name) == t) << name;
  // The JSON file written from decoded statistics is the one written from the originals.
  EXPECT_EQ(SerializeStats(*back), SerializeStats(s));
  // Sparse: far smaller than the JSON text of the same statistics.
  EXPECT_LT(bytes.size() * 2, SerializeStats(s).size());
}

TEST(QkStatsWire, MergedDecodedPartsEqualMergedOriginals) {
  StatsFile a = Make(2), b = Make(3);
  StatsFile direct = a;
  ASSERT_TRUE(MergeStats(&direct, b).ok());
  auto da = DecodeStatsWire(EncodeStatsWire(a), "rank 0", kHash);
  auto db = DecodeStatsWire(EncodeStatsWire(b), "rank 1", kHash);
  ASSERT_TRUE(da.ok() && db.ok());
  ASSERT_TRUE(MergeStats(&*da, *db).ok());
  EXPECT_EQ(SerializeStats(*da), SerializeStats(direct));
}

// The max-only fast path under a launch: range-only collectors travel as their range alone, come
// back range-only (so they merge with each other, and never pass for an empty histogram) and
// merge to what the originals merge to.
TEST(QkStatsWire, RangeOnlyStatisticsTravelWithoutHistograms) {
  auto make = [](uint32_t seed) {
    const StatsFile full = Make(seed);
    StatsFile s;
    s.model_sha256 = kHash;
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> v(3000);
    for (float& x : v) x = d(rng);
    v[5] = std::numeric_limits<float>::quiet_NaN();
    auto& act = s.tensors.emplace("act", quant::TensorCollector::RangeOnly()).first->second;
    EXPECT_TRUE(act.Observe({quant::FloatSpan(v), {static_cast<int64_t>(v.size())}}).ok());
    s.tensors.emplace("never_seen", quant::TensorCollector::RangeOnly());
    EXPECT_GT(EncodeStatsWire(full).size(), 20 * EncodeStatsWire(s).size());  // no histogram bytes
    return s;
  };
  const StatsFile a = make(11), b = make(12);
  auto da = DecodeStatsWire(EncodeStatsWire(a), "rank 0", kHash);
  auto db = DecodeStatsWire(EncodeStatsWire(b), "rank 1", kHash);
  ASSERT_TRUE(da.ok()) << da.status().ToString();
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  for (const auto& [name, t] : a.tensors) {
    EXPECT_TRUE(da->tensors.at(name) == t) << name;
    EXPECT_FALSE(da->tensors.at(name).has_histogram()) << name;
  }
  StatsFile direct = a;
  ASSERT_TRUE(MergeStats(&direct, b).ok());
  ASSERT_TRUE(MergeStats(&*da, *db).ok());
  for (const auto& [name, t] : direct.tensors) EXPECT_TRUE(da->tensors.at(name) == t) << name;
  EXPECT_EQ(da->tensors.at("act").range().nan_count, 2);
  // Range-only and histogram statistics of one tensor never merge silently.
  EXPECT_FALSE(MergeStats(&*da, Make(13)).ok());
}

TEST(QkStatsWire, RefusesAnotherModel) {
  auto r = DecodeStatsWire(EncodeStatsWire(Make(1)), "rank 2", std::string(64, 'd'));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank 2: statistics of another model"), std::string::npos)
      << r.status().message();
}

// Every truncation is refused with the sender named (without the bounds checks a short message
// would be read past its end).
TEST(QkStatsWire, RefusesEveryTruncation) {
  const std::string bytes = EncodeStatsWire(Make(4));
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 16) {
    auto r = DecodeStatsWire(bytes.substr(0, n), "rank 1");
    ASSERT_FALSE(r.ok()) << "accepted " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(r.status().message().rfind("rank 1", 0), 0u) << r.status().message();
  }
  auto extra = DecodeStatsWire(bytes + "x", "rank 1");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("1 bytes after"), std::string::npos);
}

// Flipped bytes anywhere either decode to valid statistics or fail cleanly: never a crash and
// never counts that disagree with each other (the histogram is checked against range.count).
TEST(QkStatsWire, CorruptBytesFailCleanly) {
  const std::string bytes = EncodeStatsWire(Make(5));
  std::mt19937 rng(7);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = bytes;
    const size_t at = rng() % bad.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    auto r = DecodeStatsWire(bad, "rank 3");
    if (!r.ok()) {
      ++refused;
      continue;
    }
    for (const auto& [name, t] : r->tensors) {
      if (!t.has_histogram()) continue;  // a flipped histogram flag: range-only statistics
      EXPECT_EQ(t.histogram().binned_count() + t.histogram().nonfinite_count(), t.range().count)
          << name;
    }
  }
  EXPECT_GT(refused, 100);  // most flips break an invariant (a flipped float may not)
}

}  // namespace
}  // namespace quantkit::formats
