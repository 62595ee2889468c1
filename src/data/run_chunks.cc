#include "data/run_chunks.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "common/check.h"

namespace quantkit::data {
namespace {

// The bytes of a parent tensor, kept alive by the views over it.
class ParentBuffer final : public ir::Buffer {
 public:
  explicit ParentBuffer(ir::Tensor parent) : parent_(std::move(parent)) {}
  const uint8_t* data() const override { return static_cast<const uint8_t*>(parent_.data()); }
  size_t size() const override { return parent_.nbytes(); }

 private:
  ir::Tensor parent_;
};

bool OnLeadingAxis(const ir::Tensor& tensor, int64_t batch_size) {
  return tensor.rank() > 0 && tensor.dims()[0] == batch_size;
}

bool BatchedOnLeadingAxis(const std::vector<InputSpec>& inputs, const std::string& name) {
  for (const InputSpec& in : inputs) {
    if (in.name == name) return in.batched() && in.batch_axis == 0;
  }
  return false;
}

size_t RowBytes(const ir::Tensor& t) { return t.nbytes() / static_cast<size_t>(t.dims()[0]); }

// Rows [begin, begin + count) of `t` as a view.
ir::Tensor Rows(const ir::Tensor& t, int64_t begin, int64_t count) {
  if (begin == 0 && count == t.dims()[0]) return t;
  std::vector<int64_t> dims = t.dims();
  dims[0] = count;
  return ir::Tensor(t.dtype(), std::move(dims), std::make_shared<const ParentBuffer>(t),
                    static_cast<size_t>(begin) * RowBytes(t));
}

// Rows of several tensors of one input, stacked into new memory.
ir::Tensor StackRows(
    const std::vector<std::pair<const ir::Tensor*, std::pair<int64_t, int64_t>>>& parts) {
  const ir::Tensor& first = *parts.front().first;
  std::vector<int64_t> dims = first.dims();
  dims[0] = 0;
  for (const auto& [t, range] : parts) dims[0] += range.second;
  ir::Tensor out(first.dtype(), std::move(dims));
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (const auto& [t, range] : parts) {
    const size_t row = RowBytes(*t);
    QK_CHECK(row == RowBytes(first), "stacked rows of different sizes");
    std::memcpy(dst,
                static_cast<const uint8_t*>(t->data()) + static_cast<size_t>(range.first) * row,
                static_cast<size_t>(range.second) * row);
    dst += static_cast<size_t>(range.second) * row;
  }
  return out;
}

Batch Slice(const Batch& batch, const std::vector<InputSpec>& inputs, int64_t begin,
            int64_t count) {
  if (begin == 0 && count == batch.size) return batch;
  Batch out;
  out.size = count;
  for (const auto& [name, tensor] : batch.inputs) {
    const bool rows = BatchedOnLeadingAxis(inputs, name) && OnLeadingAxis(tensor, batch.size);
    out.inputs.emplace_back(name, rows ? Rows(tensor, begin, count) : tensor);
  }
  if (batch.labels && batch.labels->rank() == 1 && OnLeadingAxis(*batch.labels, batch.size)) {
    out.labels = Rows(*batch.labels, begin, count);
  }
  return out;
}

}  // namespace

int64_t RunBatchFor(const std::vector<InputSpec>& inputs, int64_t requested) {
  int64_t run_batch = std::max<int64_t>(requested, 1);
  for (const InputSpec& in : inputs) {
    if (!in.batched() || in.batch_axis != 0 || !in.has_rank || in.dtype == ir::DType::kString)
      return 1;
    for (int64_t d : in.SampleDims()) {
      if (d < 0) return 1;
    }
    if (in.FixedBatch() > 0) run_batch = std::min(run_batch, in.FixedBatch());
  }
  return run_batch;
}

RunChunker::RunChunker(int64_t run_batch, std::vector<InputSpec> inputs, int64_t chunk_size)
    : run_batch_(std::max<int64_t>(run_batch, 1)),
      chunk_size_(std::max<int64_t>(chunk_size, 0)),
      inputs_(std::move(inputs)) {}

std::vector<Batch> RunChunker::Add(const Batch& batch) {
  std::vector<Batch> runs;
  for (int64_t offset = 0; offset < batch.size;) {
    if (pending_rows_ == 0) {
      target_ = chunk_size_ > 0 ? std::min(run_batch_, chunk_size_ - position_ % chunk_size_)
                                : run_batch_;
    }
    const int64_t take = std::min(target_ - pending_rows_, batch.size - offset);
    if (pending_rows_ == 0 && take == target_) {
      runs.push_back(Slice(batch, inputs_, offset, take));
    } else {
      pending_.push_back({batch, offset, take});
      pending_rows_ += take;
      if (pending_rows_ == target_) runs.push_back(Stack());
    }
    offset += take;
    position_ += take;
  }
  return runs;
}

std::optional<Batch> RunChunker::Finish() {
  if (pending_rows_ == 0) return std::nullopt;
  return Stack();
}

Batch RunChunker::Stack() {
  Batch out;
  if (pending_.size() == 1) {
    out = Slice(pending_.front().batch, inputs_, pending_.front().begin, pending_.front().count);
  } else {
    const Batch& first = pending_.front().batch;
    out.size = pending_rows_;
    for (size_t i = 0; i < first.inputs.size(); ++i) {
      // Named references, not a structured binding: C++17 lambdas cannot capture bindings (clang).
      const std::string& name = first.inputs[i].first;
      const ir::Tensor& tensor = first.inputs[i].second;
      if (!BatchedOnLeadingAxis(inputs_, name) || !OnLeadingAxis(tensor, first.size)) {
        out.inputs.emplace_back(name,
                                tensor);  // unbatched: RunBatchFor keeps such models at run_batch 1
        continue;
      }
      std::vector<std::pair<const ir::Tensor*, std::pair<int64_t, int64_t>>> parts;
      for (const Piece& p : pending_) {
        auto it = std::find_if(p.batch.inputs.begin(), p.batch.inputs.end(),
                               [&](const auto& in) { return in.first == name; });
        QK_CHECK(it != p.batch.inputs.end(), "input '{}' missing from a batch", name);
        parts.push_back({&it->second, {p.begin, p.count}});
      }
      out.inputs.emplace_back(name, StackRows(parts));
    }
    bool labels = true;
    for (const Piece& p : pending_) {
      labels = labels && p.batch.labels && p.batch.labels->rank() == 1 &&
               OnLeadingAxis(*p.batch.labels, p.batch.size);
    }
    if (labels) {
      std::vector<std::pair<const ir::Tensor*, std::pair<int64_t, int64_t>>> parts;
      for (const Piece& p : pending_) parts.push_back({&*p.batch.labels, {p.begin, p.count}});
      out.labels = StackRows(parts);
    }
  }
  pending_.clear();
  pending_rows_ = 0;
  return out;
}

}  // namespace quantkit::data
