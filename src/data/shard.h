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

// Samples [first, first + n) of `source` (n <= 0: to the end), clamped to the samples there are:
// a held-out tail (fallback's, qat's). first == 0 is data::Take(source, n).
std::unique_ptr<Source> Window(std::unique_ptr<Source> source, int64_t first, int64_t n);

}  // namespace quantkit::data
