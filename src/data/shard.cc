#include "data/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/check.h"

namespace quantkit::data {
namespace {

class SliceSource final : public Source {
 public:
  SliceSource(std::unique_ptr<Source> inner, ShardRange range) : inner_(std::move(inner)), range_(range) {}
  int64_t num_samples() const override { return range_.size(); }
  std::vector<std::string> input_names() const override { return inner_->input_names(); }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count >= 0 && start + count <= range_.size(), StatusCode::kInternal,
                     "SliceSource: samples {}+{} outside the shard of {}", start, count, range_.size());
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

// Blocks of `block_` consecutive samples of the inner source, starting at starts_[i].
class SpreadSource final : public Source {
 public:
  SpreadSource(std::unique_ptr<Source> inner, std::vector<int64_t> starts, int64_t block)
      : inner_(std::move(inner)), starts_(std::move(starts)), block_(block) {}
  int64_t num_samples() const override { return static_cast<int64_t>(starts_.size()) * block_; }
  std::vector<std::string> input_names() const override { return inner_->input_names(); }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    const int64_t b = start / block_, offset = start % block_;
    QK_RETURN_IF_NOT(start >= 0 && count >= 0 && b < static_cast<int64_t>(starts_.size()) && offset + count <= block_,
                     StatusCode::kInternal, "SpreadSource: samples {}+{} cross a block of {}", start, count, block_);
    return inner_->Read(starts_[static_cast<size_t>(b)] + offset, count);
  }
  std::string Describe() const override {
    return fmt::format("{} samples in {} block(s) of {} spread over {}", num_samples(), starts_.size(), block_,
                       inner_->Describe());
  }
  std::string Fingerprint() const override {
    return fmt::format("{}:spread{}x{}", inner_->Fingerprint(), starts_.size(), block_);
  }
  int64_t max_batch() const override { return block_; }

 private:
  std::unique_ptr<Source> inner_;
  std::vector<int64_t> starts_;
  int64_t block_;
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

std::unique_ptr<Source> SpreadBlocks(std::unique_ptr<Source> source, int64_t samples, int64_t block) {
  QK_CHECK(samples > 0 && block > 0, "SpreadBlocks({}, {})", samples, block);
  const int64_t n = source->num_samples();
  if (n <= samples) return source;
  int64_t b = std::min(block, samples);
  if (source->max_batch() > 0) b = std::min(b, source->max_batch());
  const int64_t blocks = std::max<int64_t>(1, samples / b);
  // blocks * b <= samples < n, so each share n / blocks holds a whole block: centred, they
  // neither overlap nor leave [0, n).
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t centre = (2 * i + 1) * n / (2 * blocks);
    starts.push_back(std::clamp<int64_t>(centre - b / 2, 0, n - b));
  }
  return std::make_unique<SpreadSource>(std::move(source), std::move(starts), b);
}

}  // namespace quantkit::data
