// BatchPrefetcher: the batches it returns are exactly ReadStackable(source, start, count) of each
// range, in order, whatever the read-ahead; a failed read comes back at its own batch and nothing
// is read after it; BatchRanges never straddles a chunk boundary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "data/prefetch.h"

namespace quantkit::data {
namespace {

// Sample i is the float i; reading at `fail_at` fails. Counts reads to prove read-ahead stops.
class CountingSource : public Source {
 public:
  explicit CountingSource(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t num_samples() const override { return n_; }
  std::vector<std::string> input_names() const override { return {"x"}; }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    ++reads_;
    if (start == fail_at_)
      return Status(StatusCode::kIoError, "disk on fire at " + std::to_string(start));
    std::vector<float> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<float>(start + i));
    Batch b;
    b.inputs.emplace_back("x", ir::Tensor::FromVector(ir::DType::kFloat, {count}, v));
    b.size = count;
    return b;
  }
  std::string Describe() const override { return "counting"; }
  std::string Fingerprint() const override { return "counting"; }
  int reads() const { return reads_.load(); }

 private:
  int64_t n_, fail_at_;
  mutable std::atomic<int> reads_{0};
};

TEST(BatchRanges, CoversEverySampleOnceAndRespectsChunks) {
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(BatchRanges(10, 4), (R{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(BatchRanges(10, 4, /*chunk_size=*/5), (R{{0, 4}, {4, 1}, {5, 4}, {9, 1}}));
  EXPECT_TRUE(BatchRanges(0, 4).empty());
}

TEST(BatchPrefetcher, ReturnsTheSourceBatchesInOrder) {
  CountingSource source(23);
  BatchPrefetcher reader(source, BatchRanges(23, 5));
  int64_t expected = 0;
  for (const auto& [start, count] : reader.ranges()) {
    ASSERT_TRUE(reader.HasNext());
    auto batches = reader.Next();
    ASSERT_TRUE(batches.ok()) << batches.status().ToString();
    ASSERT_EQ(batches->size(), 1u);  // every sample has the same shape: one batch per range
    const Batch* b = &batches->front();
    ASSERT_EQ(b->size, count);
    const float* v = b->inputs[0].second.data_as<float>();
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(v[i], static_cast<float>(expected++)) << start;
  }
  EXPECT_FALSE(reader.HasNext());
  EXPECT_EQ(expected, 23);
  EXPECT_EQ(source.reads(), 5);
}

TEST(BatchPrefetcher, AFailedReadStopsAtItsBatch) {
  CountingSource source(40, /*fail_at=*/10);
  BatchPrefetcher reader(source, BatchRanges(40, 5));
  ASSERT_TRUE(reader.Next().ok());
  ASSERT_TRUE(reader.Next().ok());
  auto bad = reader.Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIoError);
  EXPECT_NE(bad.status().message().find("at 10"), std::string::npos);
  EXPECT_FALSE(reader.HasNext());
  // ReadStackable reads a failing range again sample by sample to name the sample (one more
  // read); nothing after the failed range is read.
  EXPECT_EQ(source.reads(), 4);
}

TEST(BatchPrefetcher, DestroyedEarlyWaitsForTheReadInFlight) {
  CountingSource source(100);
  {
    BatchPrefetcher reader(source, BatchRanges(100, 10));
    ASSERT_TRUE(reader.Next().ok());
  }  // the second read was in flight; the destructor must not leave it running on `source`
  EXPECT_EQ(source.reads(), 2);
}

}  // namespace
}  // namespace quantkit::data
