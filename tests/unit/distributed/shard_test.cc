// data::ShardOf / data::Slice: the ranks' shards tile the samples in rank order on batch
// boundaries, which is what makes N-process results equal one process's.
#include "data/shard.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace quantkit::data {
namespace {

TEST(ShardTest, ShardsTileTheSamplesInRankOrderOnGranuleBoundaries) {
  for (int64_t n : {0, 1, 5, 64, 100, 600, 2048, 10000}) {
    for (int world : {1, 2, 3, 4, 7}) {
      for (int64_t granule : {1, 8, 64}) {
        int64_t next = 0, smallest = n, largest = 0;
        for (int rank = 0; rank < world; ++rank) {
          const ShardRange r = ShardOf(n, rank, world, granule);
          ASSERT_EQ(r.begin, next) << n << " " << world << " " << granule << " rank " << rank;
          ASSERT_LE(r.begin, r.end);
          // Every boundary but the end of the data is a whole number of granules (batches).
          if (r.end != n) {
            EXPECT_EQ(r.end % granule, 0);
          }
          smallest = std::min(smallest, r.size());
          largest = std::max(largest, r.size());
          next = r.end;
        }
        EXPECT_EQ(next, n) << "the shards cover every sample once";
        // Balanced: shares differ by at most one granule (plus the short last batch).
        if (n >= granule * world) {
          EXPECT_LE(largest - smallest, 2 * granule);
        }
      }
    }
  }
}

TEST(ShardTest, FewerBatchesThanRanksLeavesTheFirstRanksEmpty) {
  // 2 batches of 64 over 3 ranks: rank 0 gets nothing, ranks 1 and 2 one batch each.
  EXPECT_EQ(ShardOf(100, 0, 3, 64).size(), 0);
  EXPECT_EQ(ShardOf(100, 1, 3, 64).begin, 0);
  EXPECT_EQ(ShardOf(100, 1, 3, 64).end, 64);
  EXPECT_EQ(ShardOf(100, 2, 3, 64).end, 100);
}

// A source whose sample i is the float i (one input "x" of shape [1]).
class CountingSource final : public Source {
 public:
  explicit CountingSource(int64_t n) : n_(n) {}
  int64_t num_samples() const override { return n_; }
  std::vector<std::string> input_names() const override { return {"x"}; }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    std::vector<float> v;
    for (int64_t i = start; i < start + count; ++i) v.push_back(static_cast<float>(i));
    Batch b;
    b.size = count;
    b.inputs.emplace_back("x", ir::Tensor::FromVector<float>(ir::DType::kFloat, {count, 1}, v));
    return b;
  }
  std::string Describe() const override { return "counting"; }
  std::string Fingerprint() const override { return "c"; }

 private:
  int64_t n_;
};

TEST(ShardTest, SliceRenumbersAndRejectsReadsOutsideTheShard) {
  auto s = Slice(std::make_unique<CountingSource>(10), {4, 7});
  EXPECT_EQ(s->num_samples(), 3);
  auto b = s->Read(1, 2);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->inputs[0].second.data_as<float>()[0], 5.0f);
  EXPECT_EQ(b->inputs[0].second.data_as<float>()[1], 6.0f);
  EXPECT_FALSE(s->Read(2, 2).ok())
      << "a read past the shard must not reach the next rank's samples";
  EXPECT_EQ(s->Describe(), "samples 4-6 of counting");
  EXPECT_NE(s->Fingerprint(), "c");
}

}  // namespace
}  // namespace quantkit::data
