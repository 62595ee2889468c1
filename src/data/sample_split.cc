#include "data/sample_split.h"

#include <memory>
#include <utility>

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

ir::Tensor Row(const std::shared_ptr<const ir::Buffer>& parent, const ir::Tensor& batch, int64_t i) {
  std::vector<int64_t> dims = batch.dims();
  const size_t row_bytes = batch.nbytes() / static_cast<size_t>(dims[0]);
  dims[0] = 1;
  return ir::Tensor(batch.dtype(), std::move(dims), parent, static_cast<size_t>(i) * row_bytes);
}

bool BatchedOnLeadingAxis(const std::vector<InputSpec>& inputs, const std::string& name) {
  for (const InputSpec& in : inputs) {
    if (in.name == name) return in.batched() && in.batch_axis == 0;
  }
  return false;
}

}  // namespace

std::vector<Batch> SplitIntoSamples(const Batch& batch, const std::vector<InputSpec>& inputs) {
  if (batch.size <= 1) return {batch};
  std::vector<Batch> samples(static_cast<size_t>(batch.size));
  for (Batch& s : samples) s.size = 1;
  for (const auto& [name, tensor] : batch.inputs) {
    if (!BatchedOnLeadingAxis(inputs, name) || tensor.rank() == 0 || tensor.dims()[0] != batch.size) {
      for (Batch& s : samples) s.inputs.emplace_back(name, tensor);
      continue;
    }
    const auto parent = std::make_shared<const ParentBuffer>(tensor);
    for (int64_t i = 0; i < batch.size; ++i) samples[static_cast<size_t>(i)].inputs.emplace_back(name, Row(parent, tensor, i));
  }
  if (batch.labels && batch.labels->rank() == 1 && batch.labels->dims()[0] == batch.size) {
    const auto parent = std::make_shared<const ParentBuffer>(*batch.labels);
    for (int64_t i = 0; i < batch.size; ++i) samples[static_cast<size_t>(i)].labels = Row(parent, *batch.labels, i);
  }
  return samples;
}

}  // namespace quantkit::data
