#include "data/prefetch.h"

#include <algorithm>

#include "common/check.h"

namespace quantkit::data {

std::vector<std::pair<int64_t, int64_t>> BatchRanges(int64_t n, int64_t batch_size,
                                                     int64_t chunk_size) {
  QK_CHECK(batch_size > 0, "batch size {} must be positive", batch_size);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t start = 0; start < n;) {
    int64_t count = std::min(batch_size, n - start);
    if (chunk_size > 0) count = std::min(count, chunk_size - start % chunk_size);
    ranges.emplace_back(start, count);
    start += count;
  }
  return ranges;
}

BatchPrefetcher::BatchPrefetcher(const Source& source,
                                 std::vector<std::pair<int64_t, int64_t>> ranges)
    : source_(source), ranges_(std::move(ranges)) {
  StartRead();
}

BatchPrefetcher::~BatchPrefetcher() {
  if (pending_.valid()) pending_.wait();
}

void BatchPrefetcher::StartRead() {
  if (next_ >= ranges_.size()) return;
  const auto [start, count] = ranges_[next_];
  const Source* source = &source_;
  pending_ = std::async(
      std::launch::async, [source, start = start, count = count]() -> Result<std::vector<Batch>> {
        try {
          return ReadStackable(*source, start, count);
        } catch (const std::bad_alloc&) {
          return Status(StatusCode::kResourceExhausted, "out of memory reading a batch");
        } catch (const std::exception& e) {
          return Status(StatusCode::kInternal, e.what());
        }
      });
}

Result<std::vector<Batch>> BatchPrefetcher::Next() {
  QK_CHECK(HasNext() && pending_.valid() && !failed_, "BatchPrefetcher::Next() past the end");
  Result<std::vector<Batch>> batch = pending_.get();
  ++next_;
  if (batch.ok()) {
    StartRead();
  } else {
    failed_ = true;
    next_ = ranges_.size();
  }
  return batch;
}

}  // namespace quantkit::data
