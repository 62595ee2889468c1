// Batch axes and shape-aware batching: where each model input takes its samples (batch_axis),
// the model-layout view of sample-major sources, and reading a range of samples as the fewest
// stackable batches.
#include <algorithm>
#include <cstring>
#include <map>

#include "common/check.h"
#include "data/source.h"
#include "data/source_internal.h"

namespace quantkit::data {

std::vector<int64_t> InputSpec::SampleDims() const {
  std::vector<int64_t> out = dims;
  if (batched() && batch_axis < static_cast<int64_t>(out.size()))
    out.erase(out.begin() + batch_axis);
  return out;
}

int64_t InputSpec::FixedBatch() const {
  if (!batched() || batch_axis >= static_cast<int64_t>(dims.size())) return 0;
  return std::max<int64_t>(dims[static_cast<size_t>(batch_axis)], 0);
}

namespace {

// The batch axis of one input; `batch_names` are the symbolic leading dims of all inputs.
int64_t InferBatchAxis(const ir::TypeInfo& type, const std::map<std::string, int>& batch_names) {
  if (!type.has_shape) return 0;
  if (type.dims.empty()) return kUnbatched;
  // A symbolic dim that is another input's leading dim names the batch wherever it sits.
  for (size_t i = 1; i < type.dims.size(); ++i) {
    const std::string& p = type.dims[i].param;
    if (!p.empty() && batch_names.count(p)) return static_cast<int64_t>(i);
  }
  // [layers, B, H] / [T, B, F]: a leading dim fixed above 1 followed by a dynamic one.
  if (type.dims.size() >= 2 && type.dims[0].is_known() && type.dims[0].value > 1 &&
      !type.dims[1].is_known()) {
    return 1;
  }
  return 0;
}

}  // namespace

std::vector<InputSpec> ModelInputs(const ir::Model& model) {
  std::map<std::string, int> batch_names;
  for (const ir::Value* v : model.graph->inputs()) {
    if (v->is_initializer() || !v->type.has_shape || v->type.dims.empty()) continue;
    if (!v->type.dims[0].param.empty()) ++batch_names[v->type.dims[0].param];
  }
  std::vector<InputSpec> out;
  for (const ir::Value* v : model.graph->inputs()) {
    if (v->is_initializer()) continue;
    InputSpec s;
    s.name = v->name();
    s.dtype = v->type.dtype == ir::DType::kUndefined ? ir::DType::kFloat : v->type.dtype;
    if (auto dims = v->type.ConcreteDims()) {
      s.dims = *dims;
      s.has_rank = true;
    }
    s.batch_axis = InferBatchAxis(v->type, batch_names);
    out.push_back(std::move(s));
  }
  return out;
}

namespace internal {

Result<ir::Tensor> SamplesToModelLayout(ir::Tensor t, const InputSpec& spec) {
  QK_RETURN_IF_NOT(t.rank() >= 1, StatusCode::kInternal, "input '{}': samples without a sample dim",
                   spec.name);
  const int64_t count = t.dims()[0];
  if (!spec.batched()) {
    // One value for the whole run: every sample of the batch must hold the same one.
    const size_t row = t.nbytes() / static_cast<size_t>(std::max<int64_t>(count, 1));
    const auto* bytes = static_cast<const uint8_t*>(t.data());
    for (int64_t i = 1; i < count; ++i) {
      QK_RETURN_IF_NOT(
          std::memcmp(bytes, bytes + row * static_cast<size_t>(i), row) == 0,
          StatusCode::kInvalidArgument,
          "input '{}' is fed once per run (unbatched) but samples of this batch differ in it",
          spec.name);
    }
    ir::Tensor one(t.dtype(), std::vector<int64_t>(t.dims().begin() + 1, t.dims().end()));
    std::memcpy(one.mutable_data(), bytes, row);
    return one;
  }
  const auto axis = static_cast<size_t>(spec.batch_axis);
  if (axis == 0) return t;
  QK_RETURN_IF_NOT(axis < t.dims().size(), StatusCode::kInvalidArgument,
                   "input '{}': batch axis {} is past the sample's rank {}", spec.name, axis,
                   t.rank() - 1);
  // [count, d0..d(k-1), dk..] -> [d0..d(k-1), count, dk..]
  std::vector<int64_t> dims(t.dims().begin() + 1, t.dims().end());
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis), count);
  size_t outer = 1;
  for (size_t i = 1; i <= axis; ++i) outer *= static_cast<size_t>(t.dims()[i]);
  const size_t row = t.nbytes() / static_cast<size_t>(std::max<int64_t>(count, 1));
  const size_t inner = outer == 0 ? 0 : row / outer;
  ir::Tensor out(t.dtype(), dims);
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (size_t o = 0; o < outer; ++o) {
    for (size_t b = 0; b < static_cast<size_t>(count); ++b) {
      std::memcpy(dst + (o * static_cast<size_t>(count) + b) * inner, src + b * row + o * inner,
                  inner);
    }
  }
  return out;
}

Result<ir::Tensor> ModelLayoutToSamples(ir::Tensor t, const InputSpec& spec,
                                        const std::string& origin) {
  if (!spec.batched()) return WithLeadingDim(std::move(t));
  const auto axis = static_cast<size_t>(spec.batch_axis);
  QK_RETURN_IF_NOT(axis < t.dims().size(), StatusCode::kInvalidArgument,
                   "{}: input '{}' has rank {}, too low for its batch axis {}", origin, spec.name,
                   t.rank(), axis);
  if (axis == 0) return t;
  // [d0..d(k-1), B, dk..] -> [B, d0..d(k-1), dk..]
  const int64_t count = t.dims()[axis];
  std::vector<int64_t> dims = t.dims();
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.begin(), count);
  size_t outer = 1;
  for (size_t i = 0; i < axis; ++i) outer *= static_cast<size_t>(t.dims()[i]);
  const size_t lines = outer * static_cast<size_t>(count);
  const size_t inner = lines == 0 ? 0 : t.nbytes() / lines;
  ir::Tensor out(t.dtype(), dims);
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.mutable_data());
  for (size_t o = 0; o < outer; ++o) {
    for (size_t b = 0; b < static_cast<size_t>(count); ++b) {
      std::memcpy(dst + (b * outer + o) * inner, src + (o * static_cast<size_t>(count) + b) * inner,
                  inner);
    }
  }
  return out;
}

namespace {

// Presents a sample-major source in the model's layout and caps batches at a fixed batch dim.
class ModelLayoutSource final : public Source {
 public:
  ModelLayoutSource(std::unique_ptr<Source> inner, std::vector<InputSpec> inputs)
      : inner_(std::move(inner)), inputs_(std::move(inputs)) {
    for (const InputSpec& s : inputs_) {
      const int64_t fixed = s.FixedBatch();
      if (fixed > 0) max_batch_ = max_batch_ == 0 ? fixed : std::min(max_batch_, fixed);
    }
  }
  int64_t num_samples() const override { return inner_->num_samples(); }
  std::vector<std::string> input_names() const override { return inner_->input_names(); }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_ASSIGN_OR_RETURN(Batch b, inner_->Read(start, count));
    for (auto& [name, t] : b.inputs) {
      // Found without a lambda: C++17 lambdas cannot capture a structured binding (clang refuses).
      auto it = inputs_.begin();
      while (it != inputs_.end() && it->name != name) ++it;
      if (it == inputs_.end()) continue;
      QK_ASSIGN_OR_RETURN(t, SamplesToModelLayout(std::move(t), *it));
    }
    return b;
  }
  std::string Describe() const override { return inner_->Describe(); }
  std::string Fingerprint() const override { return inner_->Fingerprint(); }
  int64_t max_batch() const override { return max_batch_; }

  // Samples `indices` (any order, not necessarily adjacent) of equal per-sample shapes as one
  // model-layout batch: gathered sample-major, then laid out as Read() does.
  Result<Batch> ReadIndices(const std::vector<int64_t>& indices) const {
    std::vector<Batch> rows;
    for (int64_t i : indices) {
      QK_ASSIGN_OR_RETURN(Batch b, inner_->Read(i, 1));
      rows.push_back(std::move(b));
    }
    Batch out;
    out.size = static_cast<int64_t>(indices.size());
    for (size_t k = 0; k < rows.front().inputs.size(); ++k) {
      std::vector<const ir::Tensor*> samples;
      for (const Batch& r : rows) samples.push_back(&r.inputs[k].second);
      // Each row is [1, ...]: stacking gives [n, 1, ...]; drop the 1.
      QK_ASSIGN_OR_RETURN(ir::Tensor stacked, StackRows(samples, rows.front().inputs[k].first));
      std::vector<int64_t> dims = stacked.dims();
      dims.erase(dims.begin() + 1);
      ir::Tensor t(stacked.dtype(), dims);
      std::memcpy(t.mutable_data(), stacked.data(), stacked.nbytes());
      const std::string& name = rows.front().inputs[k].first;
      const auto it = std::find_if(inputs_.begin(), inputs_.end(),
                                   [&](const InputSpec& s) { return s.name == name; });
      if (it != inputs_.end()) {
        QK_ASSIGN_OR_RETURN(t, SamplesToModelLayout(std::move(t), *it));
      }
      out.inputs.emplace_back(name, std::move(t));
    }
    if (rows.front().labels) {
      std::vector<int64_t> labels;
      for (const Batch& r : rows) labels.push_back(r.labels ? r.labels->data_as<int64_t>()[0] : -1);
      out.labels = ir::Tensor::FromVector<int64_t>(ir::DType::kInt64, {out.size}, labels);
    }
    return out;
  }
  std::unique_ptr<Source> TakeInner(
      int64_t n,
      const std::function<std::unique_ptr<Source>(std::unique_ptr<Source>, int64_t)>& take) {
    return std::make_unique<ModelLayoutSource>(take(std::move(inner_), n), std::move(inputs_));
  }

 private:
  std::unique_ptr<Source> inner_;
  std::vector<InputSpec> inputs_;
  int64_t max_batch_ = 0;
};

// The dims of every input of a batch of one: samples with equal signatures stack.
std::string ShapeSignature(const Batch& b) {
  std::string sig;
  for (const auto& [name, t] : b.inputs) {
    sig += name + ":" + std::to_string(static_cast<int>(t.dtype()));
    for (int64_t d : t.dims()) sig += "," + std::to_string(d);
    sig += ";";
  }
  return sig;
}

}  // namespace

std::unique_ptr<Source> WithModelLayout(std::unique_ptr<Source> source,
                                        const std::vector<InputSpec>& inputs) {
  return std::make_unique<ModelLayoutSource>(std::move(source), inputs);
}

std::unique_ptr<Source> TakeBelowLayout(
    std::unique_ptr<Source> source, int64_t n,
    const std::function<std::unique_ptr<Source>(std::unique_ptr<Source>, int64_t)>& take) {
  if (auto* layout = dynamic_cast<ModelLayoutSource*>(source.get()))
    return layout->TakeInner(n, take);
  return take(std::move(source), n);
}

}  // namespace internal

namespace {

// Appends samples [first, first+len) of equal shapes as few batches as stack: the whole run, or
// else its halves, recursively (an unbatched input whose value changes inside the run).
Status AppendRun(const Source& source, int64_t first, int64_t len, int64_t offset,
                 std::vector<Batch>* singles, std::vector<Batch>* out) {
  if (len == 1) {
    out->push_back(std::move((*singles)[static_cast<size_t>(first - offset)]));
    return Status::Ok();
  }
  auto run = source.Read(first, len);
  if (run.ok()) {
    out->push_back(*std::move(run));
    return Status::Ok();
  }
  const int64_t half = len / 2;
  QK_RETURN_IF_ERROR(AppendRun(source, first, half, offset, singles, out));
  return AppendRun(source, first + half, len - half, offset, singles, out);
}

}  // namespace

Result<std::vector<Batch>> ReadStackable(const Source& source, int64_t start, int64_t count) {
  std::vector<Batch> out;
  {
    auto whole = source.Read(start, count);
    if (whole.ok() || count == 1) {
      if (!whole.ok()) return whole.status();
      out.push_back(*std::move(whole));
      return out;
    }
  }
  // Samples that do not all stack: read each (its errors are the real ones), then batch each run
  // of consecutive samples with equal shapes.
  std::vector<Batch> singles;
  std::vector<std::string> sigs;
  for (int64_t i = start; i < start + count; ++i) {
    QK_ASSIGN_OR_RETURN(Batch b, source.Read(i, 1));
    sigs.push_back(internal::ShapeSignature(b));
    singles.push_back(std::move(b));
  }
  // Samples of equal shapes anywhere in the window form one batch (text lines whose widths
  // alternate still batch by width); statistics do not depend on the order of samples.
  const auto* layout = dynamic_cast<const internal::ModelLayoutSource*>(&source);
  std::vector<bool> done(singles.size(), false);
  for (size_t i = 0; i < singles.size(); ++i) {
    if (done[i]) continue;
    std::vector<int64_t> group;
    for (size_t j = i; j < singles.size(); ++j) {
      if (!done[j] && sigs[j] == sigs[i])
        group.push_back(start + static_cast<int64_t>(j)), done[j] = true;
    }
    const bool adjacent = group.back() - group.front() + 1 == static_cast<int64_t>(group.size());
    if (group.size() > 1 && !adjacent && layout) {
      auto gathered = layout->ReadIndices(group);
      if (gathered.ok()) {
        out.push_back(*std::move(gathered));
        continue;
      }
    }
    if (adjacent) {
      QK_RETURN_IF_ERROR(AppendRun(source, group.front(), static_cast<int64_t>(group.size()), start,
                                   &singles, &out));
    } else {
      for (int64_t g : group) out.push_back(std::move(singles[static_cast<size_t>(g - start)]));
    }
  }
  return out;
}

int64_t EffectiveBatchSize(const Source& source, int64_t requested) {
  const int64_t fixed = source.max_batch();
  return fixed > 0 ? std::min(fixed, requested) : requested;
}

}  // namespace quantkit::data
