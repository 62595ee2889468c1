// QAT step 4: the training data, its labels and the validation data; batches as the trainer
// takes them.
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>

#include "common/check.h"
#include "data/npy.h"
#include "data/shard.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {

namespace {

// --labels: one class index per sample of the whole training data (so that --samples takes the
// first labels with the first samples); a file of another length is another data set's labels.
Result<std::vector<int64_t>> ReadLabels(const QatOptions& o, int64_t all_samples, int64_t n) {
  std::vector<int64_t> labels;
  if (o.labels.empty()) return labels;
  QK_RETURN_IF_NOT(
      o.trainer.label_weight > 0, StatusCode::kInvalidArgument,
      "--labels {}: the label-free loss uses no labels; use --loss ce, ce+kl or ce+mse", o.labels);
  QK_ASSIGN_OR_RETURN(ir::Tensor l, data::ReadNpy(o.labels));
  QK_RETURN_IF_NOT((l.dtype() == ir::DType::kInt64 || l.dtype() == ir::DType::kInt32) &&
                       l.rank() == 1 && l.numel() == all_samples,
                   StatusCode::kInvalidArgument,
                   "{}: labels must be int32/int64 [{}] (one per sample of '{}'), got {}[{}]",
                   o.labels, all_samples, o.data, ir::DTypeName(l.dtype()),
                   fmt::join(l.dims(), ","));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v =
        l.dtype() == ir::DType::kInt64 ? l.data_as<int64_t>()[i] : l.data_as<int32_t>()[i];
    QK_RETURN_IF_NOT(v >= 0, StatusCode::kInvalidArgument, "{}: label {} of sample {} is negative",
                     o.labels, v, i);
    labels.push_back(v);
  }
  return labels;
}

// Classes of the first output [batch, ...] when its shape is static (0 otherwise): labels can
// then be checked before training rather than at the batch that holds a bad one.
int64_t StaticClasses(const ir::Model& m) {
  if (m.graph->outputs().empty()) return 0;
  const std::optional<std::vector<int64_t>> dims = m.graph->outputs().front()->type.ConcreteDims();
  if (!dims.has_value() || dims->size() < 2) return 0;
  int64_t classes = 1;
  for (size_t i = 1; i < dims->size(); ++i) {
    if ((*dims)[i] < 0) return 0;
    classes *= (*dims)[i];
  }
  return classes;
}

}  // namespace

Result<int64_t> HoldoutSize(int64_t requested, int64_t n, int64_t batch_size, bool has_val) {
  if (has_val) {
    QK_RETURN_IF_NOT(requested <= 0, StatusCode::kInvalidArgument,
                     "--holdout {} with --val: the run is validated on --val; give one of them",
                     requested);
    return int64_t{0};
  }
  if (requested == QatOptions::kAutoHoldout) {
    const int64_t h = std::min(kMaxAutoHoldout, n / 10);
    return n - h >= batch_size ? h : 0;
  }
  QK_RETURN_IF_NOT(requested >= 0 && n - requested >= batch_size, StatusCode::kInvalidArgument,
                   "--holdout {} leaves {} of the {} training samples, fewer than one batch of {}",
                   requested, n - requested, n, batch_size);
  return requested;
}

Result<TrainingData> OpenTrainingData(const QatOptions& o, const ir::Model& teacher) {
  const std::vector<data::InputSpec> inputs = data::ModelInputs(teacher);
  TrainingData d;
  QK_ASSIGN_OR_RETURN(d.train, data::OpenSource(o.data, inputs, o.image));
  const int64_t all_samples = d.train->num_samples();
  d.train = data::Take(std::move(d.train), o.samples);
  int64_t n = d.train->num_samples();
  QK_RETURN_IF_NOT(n >= o.batch_size, StatusCode::kInvalidArgument,
                   "training data '{}' holds {} samples, fewer than one batch of {}", o.data, n,
                   o.batch_size);
  // The held-out tail: opened again (a source is not shared) and sliced; the training source
  // keeps the samples before it, so labels by sample number stay aligned.
  QK_ASSIGN_OR_RETURN(d.holdout, HoldoutSize(o.holdout, n, o.batch_size, !o.val.empty()));
  if (d.holdout > 0) {
    QK_ASSIGN_OR_RETURN(d.val, data::OpenSource(o.data, inputs, o.image));
    d.val = data::Slice(std::move(d.val), {n - d.holdout, n});
    d.val_first_sample = n - d.holdout;
    d.val_description = fmt::format("the last {} samples of --data, held out", d.holdout);
    n -= d.holdout;
    d.train = data::Slice(std::move(d.train), {0, n});
  }
  d.samples = n;
  QK_ASSIGN_OR_RETURN(d.labels, ReadLabels(o, all_samples, n));
  if (const int64_t classes = StaticClasses(teacher); classes > 0 && !d.labels.empty()) {
    const int64_t top = *std::max_element(d.labels.begin(), d.labels.end());
    QK_RETURN_IF_NOT(
        top < classes, StatusCode::kInvalidArgument,
        "{}: label {} is out of range for the model's {} outputs (labels must be in [0, {}))",
        o.labels, top, classes, classes);
  }
  if (!o.val.empty()) {
    QK_ASSIGN_OR_RETURN(d.val, data::OpenSource(o.val, inputs, o.image));
    d.val = data::Take(std::move(d.val), o.val_samples);
    d.val_description = fmt::format("{}, {} samples", o.val, d.val->num_samples());
  }
  return d;
}

train::TrainingBatch ToTraining(data::Batch&& b) {
  train::TrainingBatch t;
  for (auto& [name, tensor] : b.inputs) t.inputs.push_back({name, std::move(tensor)});
  t.labels = std::move(b.labels);
  return t;
}

// Each Read(i, 1) is a contiguous [1, ...] tensor, so stacking is concatenating their bytes.
Result<train::TrainingBatch> GatherSamples(const data::Source& source,
                                           const std::vector<int64_t>& indices) {
  std::vector<data::Batch> parts;
  for (int64_t i : indices) {
    QK_ASSIGN_OR_RETURN(data::Batch b, source.Read(i, 1));
    QK_RETURN_IF_NOT(parts.empty() || (b.labels.has_value() == parts.front().labels.has_value() &&
                                       b.inputs.size() == parts.front().inputs.size()),
                     StatusCode::kInvalidArgument,
                     "{}: sample {} differs in inputs or labels from the first", source.Describe(),
                     i);
    parts.push_back(std::move(b));
  }
  QK_RETURN_IF_NOT(!parts.empty(), StatusCode::kInvalidArgument, "empty batch");
  const int64_t n = static_cast<int64_t>(parts.size());
  auto stack = [&](auto get) -> Result<ir::Tensor> {
    const ir::Tensor& first = get(parts.front());
    std::vector<int64_t> dims = first.dims();
    QK_RETURN_IF_NOT(!dims.empty() && dims[0] == 1, StatusCode::kInternal,
                     "a sample is not [1, ...]");
    dims[0] = n;
    ir::Tensor out(first.dtype(), dims);
    uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
    for (const data::Batch& b : parts) {
      const ir::Tensor& t = get(b);
      QK_RETURN_IF_NOT(t.dims() == first.dims() && t.dtype() == first.dtype(),
                       StatusCode::kInvalidArgument,
                       "{}: samples of different shapes cannot share a batch", source.Describe());
      std::memcpy(dst, t.data(), t.nbytes());
      dst += t.nbytes();
    }
    return out;
  };
  train::TrainingBatch out;
  for (size_t k = 0; k < parts.front().inputs.size(); ++k) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t, stack([k](const data::Batch& b) -> const ir::Tensor& {
                          return b.inputs[k].second;
                        }));
    out.inputs.push_back({parts.front().inputs[k].first, std::move(t)});
  }
  if (parts.front().labels.has_value()) {
    QK_ASSIGN_OR_RETURN(ir::Tensor l,
                        stack([](const data::Batch& b) -> const ir::Tensor& { return *b.labels; }));
    out.labels = std::move(l);
  }
  return out;
}

std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates: portable, unlike std::shuffle
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

}  // namespace quantkit::pipelines::qat
