// BatchPrefetcher: reads the next batch of a Source on a background thread while the caller
// runs the model on the current one, so data loading (image decoding, page faults of
// memory-mapped .npy files) overlaps the compute. On a GPU the model run is asynchronous as well,
// so loading, the host-to-device copy and the kernels of consecutive batches overlap.
//
//   BatchPrefetcher reader(source, {{0, 32}, {32, 32}, {64, 8}});
//   while (reader.HasNext()) { QK_ASSIGN_OR_RETURN(std::vector<Batch> b, reader.Next()); ... }
//
// Batches come back in the order of `ranges`, exactly as ReadStackable(source, start, count)
// gives them (one batch, or runs of equal shapes);
// a failed read is returned by the Next() call of that batch (later reads are not attempted).
// At most one read is in flight; the destructor waits for it. Source::Read is const and the
// sources keep no mutable state, so reading on another thread is safe.
#pragma once

#include <cstdint>
#include <future>
#include <utility>
#include <vector>

#include "data/source.h"

namespace quantkit::data {

// [start, count) of each batch over n samples: batch_size samples each (the last may be
// shorter); with chunk_size > 0 no batch straddles a multiple of chunk_size. batch_size > 0.
std::vector<std::pair<int64_t, int64_t>> BatchRanges(int64_t n, int64_t batch_size,
                                                     int64_t chunk_size = 0);

class BatchPrefetcher {
 public:
  BatchPrefetcher(const Source& source, std::vector<std::pair<int64_t, int64_t>> ranges);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  const std::vector<std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }
  bool HasNext() const { return next_ < ranges_.size(); }
  // The batches of the next range; starts reading the one after it before returning.
  Result<std::vector<Batch>> Next();

 private:
  void StartRead();

  const Source& source_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  size_t next_ = 0;  // index of the range Next() returns
  std::future<Result<std::vector<Batch>>> pending_;
  bool failed_ = false;
};

}  // namespace quantkit::data
