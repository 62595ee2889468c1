// Sharding a data source across the ranks of a distributed run (runtime/communicator.h).
//
// Rank r of N works on one contiguous range of samples; the ranges are in rank order and cover
// the source exactly once, so concatenating per-rank results in rank order is the single-process
// order. Boundaries fall on multiples of `granule` (the caller passes its batch size): every
// rank then runs exactly the batches a single process would run over the same samples, so the
// model sees the same inputs batch for batch and the results are byte-identical to one process.
// Whole granules are dealt as evenly as possible (the first ranks get the smaller share); a rank
// may get no samples when there are fewer granules than ranks.
#pragma once

#include <cstdint>
#include <memory>

#include "data/source.h"

namespace quantkit::data {

struct ShardRange {
  int64_t begin = 0;  // first sample
  int64_t end = 0;    // one past the last sample
  int64_t size() const { return end - begin; }
};

// Requires num_samples >= 0, 0 <= rank < world_size, granule > 0.
ShardRange ShardOf(int64_t num_samples, int rank, int world_size, int64_t granule);

// Samples [range.begin, range.end) of `source`, renumbered from 0. Describe() and Fingerprint()
// name the range; an empty range is allowed (num_samples() == 0).
std::unique_ptr<Source> Slice(std::unique_ptr<Source> source, ShardRange range);

// About `samples` samples of `source`, taken as blocks of `block` consecutive samples spread
// evenly over it, so that data stored in order (an image folder sorted by class, a recording)
// is seen from end to end: with B = max(1, samples / block) blocks of b = min(block, samples,
// source.max_batch()) samples, block i starts at floor((2i + 1) N / 2B) - b/2 (centred in its
// N/B share; the blocks never overlap). The whole source when it holds no more than `samples`.
// max_batch() is the block, so a batched read stays within one block (one contiguous read of
// the source). Requires samples > 0, block > 0.
std::unique_ptr<Source> SpreadBlocks(std::unique_ptr<Source> source, int64_t samples, int64_t block);

}  // namespace quantkit::data
