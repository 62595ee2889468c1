#include "data/shard.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/check.h"

namespace quantkit::data {
namespace {

class SliceSource final : public Source {
 public:
  SliceSource(std::unique_ptr<Source> inner, ShardRange range)
      : inner_(std::move(inner)), range_(range) {}
  int64_t num_samples() const override { return range_.size(); }
  std::vector<std::string> input_names() const override { return inner_->input_names(); }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count >= 0 && start + count <= range_.size(),
                     StatusCode::kInternal, "SliceSource: samples {}+{} outside the shard of {}",
                     start, count, range_.size());
    return inner_->Read(range_.begin + start, count);
  }
  std::string Describe() const override {
    return fmt::format("samples {}-{} of {}", range_.begin, range_.end - 1, inner_->Describe());
  }
  std::string Fingerprint() const override {
    return fmt::format("{}:{}-{}", inner_->Fingerprint(), range_.begin, range_.end);
  }
  int64_t max_batch() const override { return inner_->max_batch(); }

 private:
  std::unique_ptr<Source> inner_;
  ShardRange range_;
};

}  // namespace

ShardRange ShardOf(int64_t num_samples, int rank, int world_size, int64_t granule) {
  QK_CHECK(num_samples >= 0 && world_size > 0 && rank >= 0 && rank < world_size && granule > 0,
           "ShardOf({}, {}, {}, {})", num_samples, rank, world_size, granule);
  const int64_t granules = (num_samples + granule - 1) / granule;
  // Rank r gets granules [floor(G*r/N), floor(G*(r+1)/N)): sizes differ by at most one granule.
  const int64_t first = granules * rank / world_size;
  const int64_t last = granules * (rank + 1) / world_size;
  return {std::min(first * granule, num_samples), std::min(last * granule, num_samples)};
}

std::unique_ptr<Source> Slice(std::unique_ptr<Source> source, ShardRange range) {
  QK_CHECK(range.begin >= 0 && range.begin <= range.end && range.end <= source->num_samples(),
           "Slice [{}, {}) of {} samples", range.begin, range.end, source->num_samples());
  return std::make_unique<SliceSource>(std::move(source), range);
}

std::unique_ptr<Source> Window(std::unique_ptr<Source> source, int64_t first, int64_t n) {
  if (first <= 0) return Take(std::move(source), n);
  const int64_t total = source->num_samples();
  const int64_t begin = std::min(first, total);
  const int64_t end = n > 0 ? std::min(total, begin + n) : total;
  return Slice(std::move(source), {begin, end});
}

}  // namespace quantkit::data
