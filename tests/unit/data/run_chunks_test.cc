// RunChunker: calibration's model runs depend on the sample index only. Whatever batches come in,
// the runs are [0, K), [K, 2K), ... and the rest; runs inside one batch are views of its rows (no
// copy), runs straddling batches are stacked; unbatched inputs and labels follow the rules of
// data/run_chunks.h. RunBatchFor falls back to one sample per run where runs cannot be stacked.
#include "data/run_chunks.h"

#include <gtest/gtest.h>

#include <numeric>

namespace quantkit::data {
namespace {

InputSpec Spec(const std::string& name, std::vector<int64_t> dims, int64_t batch_axis = 0) {
  InputSpec s;
  s.name = name;
  s.dims = std::move(dims);
  s.has_rank = true;
  s.batch_axis = batch_axis;
  return s;
}

// Samples [start, start + count) of x: [N, 2] with sample i = {i, -i}; labels i.
Batch Samples(int64_t start, int64_t count) {
  std::vector<float> v;
  std::vector<int64_t> labels;
  for (int64_t i = start; i < start + count; ++i) {
    v.push_back(static_cast<float>(i));
    v.push_back(static_cast<float>(-i));
    labels.push_back(i);
  }
  Batch b;
  b.inputs.emplace_back("x", ir::Tensor::FromVector(ir::DType::kFloat, {count, 2}, v));
  b.labels = ir::Tensor::FromVector(ir::DType::kInt64, {count}, labels);
  b.size = count;
  return b;
}

// The sample indices a run holds (from x), checking each row and label against it.
std::vector<int64_t> Indices(const Batch& run) {
  const ir::Tensor& x = run.inputs.at(0).second;
  EXPECT_EQ(x.dims(), (std::vector<int64_t>{run.size, 2}));
  EXPECT_TRUE(run.labels.has_value());
  std::vector<int64_t> out;
  for (int64_t r = 0; r < run.size; ++r) {
    const float v = x.data_as<float>()[2 * r];
    EXPECT_EQ(x.data_as<float>()[2 * r + 1], -v);
    EXPECT_EQ(run.labels->data_as<int64_t>()[r], static_cast<int64_t>(v));
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

std::vector<std::vector<int64_t>> Cut(int64_t run_batch, const std::vector<int64_t>& batch_sizes,
                                      int64_t chunk_size = 0, int64_t first = 0) {
  RunChunker chunker(run_batch, {Spec("x", {-1, 2})}, chunk_size);
  std::vector<std::vector<int64_t>> runs;
  int64_t start = first;
  for (int64_t size : batch_sizes) {
    for (const Batch& run : chunker.Add(Samples(start, size))) runs.push_back(Indices(run));
    start += size;
  }
  if (std::optional<Batch> rest = chunker.Finish()) runs.push_back(Indices(*rest));
  EXPECT_FALSE(chunker.Finish().has_value());
  return runs;
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> v(static_cast<size_t>(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

TEST(RunChunker, RunsDependOnTheSampleIndexOnly) {
  const std::vector<std::vector<int64_t>> expected = {Range(0, 8), Range(8, 16), Range(16, 17)};
  for (const std::vector<int64_t>& batches :
       std::vector<std::vector<int64_t>>{{17},
                                         {5, 3, 8, 1},
                                         {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                                         {16, 1},
                                         {3, 13, 1},
                                         {8, 8, 1}}) {
    EXPECT_EQ(Cut(8, batches), expected) << "batches of " << ::testing::PrintToString(batches);
  }
  EXPECT_EQ(Cut(8, {8, 8}), (std::vector<std::vector<int64_t>>{Range(0, 8), Range(8, 16)}));
  EXPECT_EQ(Cut(1, {2, 1}), (std::vector<std::vector<int64_t>>{{0}, {1}, {2}}));
}

// diagnose: runs restart at every chunk (statistics per chunk), and a rank whose shard starts at
// a chunk boundary cuts its chunks exactly as one process does.
TEST(RunChunker, RunsRestartAtEveryChunk) {
  const std::vector<std::vector<int64_t>> expected = {Range(0, 4),   Range(4, 8),   Range(8, 10),
                                                      Range(10, 14), Range(14, 18), Range(18, 20),
                                                      Range(20, 23)};
  EXPECT_EQ(Cut(4, {7, 9, 7}, 10), expected);
  EXPECT_EQ(Cut(4, {23}, 10), expected);
  EXPECT_EQ(Cut(4, {1, 2, 20}, 10), expected);
  EXPECT_EQ(Cut(4, {5, 8}, 10, /*first=*/10),
            (std::vector<std::vector<int64_t>>{Range(10, 14), Range(14, 18), Range(18, 20),
                                               Range(20, 23)}));
}

TEST(RunChunker, RunsInsideOneBatchAreViewsAndStraddlingRunsAreCopies) {
  RunChunker chunker(4, {Spec("x", {-1, 2})});
  const Batch first = Samples(0, 6);
  const float* base = first.inputs[0].second.data_as<float>();
  std::vector<Batch> runs = chunker.Add(first);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].inputs[0].second.data_as<float>(), base);  // rows 0-3: a view
  runs = chunker.Add(Samples(6, 6));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(Indices(runs[0]), Range(4, 8));  // rows 4-5 of the first batch, 0-1 of the second
  EXPECT_NE(runs[0].inputs[0].second.data_as<float>(), base + 8);
  EXPECT_EQ(Indices(runs[1]), Range(8, 12));
  EXPECT_FALSE(chunker.Finish().has_value());
}

TEST(RunChunker, UnbatchedInputsArePassedWhole) {
  RunChunker chunker(1, {Spec("x", {-1, 2}), Spec("sr", {}, kUnbatched)});
  Batch b = Samples(0, 2);
  b.inputs.emplace_back("sr",
                        ir::Tensor::FromVector(ir::DType::kInt64, {}, std::vector<int64_t>{16000}));
  std::vector<Batch> runs = chunker.Add(b);
  ASSERT_EQ(runs.size(), 2u);
  for (const Batch& run : runs) {
    ASSERT_EQ(run.inputs.size(), 2u);
    EXPECT_EQ(run.inputs[1].first, "sr");
    EXPECT_EQ(run.inputs[1].second.data_as<int64_t>()[0], 16000);
  }
}

TEST(RunBatchFor, StacksOnlyWhereEveryInputStacksOnItsLeadingAxis) {
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 3, 224, 224})}, 8), 8);
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 3, 224, 224}), Spec("y", {-1, 10})}, 8), 8);
  EXPECT_EQ(RunBatchFor({Spec("x", {4, 3, 224, 224})}, 8), 4)
      << "a batch the model fixes caps the run";
  EXPECT_EQ(RunBatchFor({Spec("x", {1, 3, 224, 224})}, 8), 1);
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 3, -1, -1})}, 8), 1) << "varying sample shapes";
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 512}), Spec("state", {2, -1, 128}, 1)}, 8), 1)
      << "state batched on axis 1";
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 512}), Spec("sr", {}, kUnbatched)}, 8), 1)
      << "unbatched input";
  InputSpec unknown;
  unknown.name = "x";
  EXPECT_EQ(RunBatchFor({unknown}, 8), 1) << "unknown rank";
  EXPECT_EQ(RunBatchFor({Spec("x", {-1, 2})}, 0), 1);
}

}  // namespace
}  // namespace quantkit::data
