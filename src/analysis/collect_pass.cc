#include "analysis/collect_pass.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <memory>

#include "common/check.h"
#include "common/progress.h"

namespace quantkit::analysis {

Status CollectingObserver::OnTensor(const std::string& name, const ir::Node* /*producer*/,
                                    const runtime::TensorView& view) {
  auto it = collectors_->find(name);
  if (it == collectors_->end()) return Status::Ok();
  quant::TensorView v{quant::FloatSpan(view.data_as<float>(), static_cast<size_t>(view.numel())),
                      view.shape};
  return it->second.Observe(v).WithContext(fmt::format("tensor '{}'", name));
}

BatchReader ReadInOrder(const data::Source& source, const PassOptions& options) {
  struct State {
    int64_t start = 0;
    std::deque<data::Batch> pending;
  };
  auto state = std::make_shared<State>();
  const int64_t n = source.num_samples();
  // A model with a fixed batch dim caps the batch; samples that do not stack (varying shapes)
  // run in runs of equal shapes (data::ReadStackable), so no batch size has to be chosen by hand.
  int64_t batch_size = data::EffectiveBatchSize(source, options.batch_size);
  // run_batch > 0 caps what one model run sees (kSampleExactRunBatch: sample-exact statistics).
  if (options.run_batch > 0) batch_size = std::min(batch_size, options.run_batch);
  const int64_t chunk_size = options.chunk_size;
  return [&source, state, n, batch_size, chunk_size]() -> Result<std::optional<data::Batch>> {
    while (state->pending.empty()) {
      if (state->start >= n) return std::optional<data::Batch>();
      int64_t count = std::min(batch_size, n - state->start);
      if (chunk_size > 0) count = std::min(count, chunk_size - state->start % chunk_size);
      QK_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, data::ReadStackable(source, state->start, count));
      state->start += count;
      for (data::Batch& b : batches) state->pending.push_back(std::move(b));
    }
    data::Batch batch = std::move(state->pending.front());
    state->pending.pop_front();
    return std::optional<data::Batch>(std::move(batch));
  };
}

Result<int64_t> RunBatches(const runtime::Interpreter& interpreter, const BatchReader& next,
                           int64_t size_hint, const PassOptions& options,
                           const std::vector<runtime::Observer*>& observers, const PassHooks& hooks) {
  runtime::RunOptions run_options;
  run_options.observers = observers;
  Progress progress(options.label, std::max<int64_t>(size_hint, 0), "samples");
  if (!options.progress) progress.set_enabled(false);
  int64_t start = 0;
  while (true) {
    auto batch = next();
    if (!batch.ok()) return batch.status();
    if (!batch->has_value()) break;
    data::Batch& b = **batch;
    const int64_t count = b.size;
    if (hooks.before_run) QK_RETURN_IF_ERROR(hooks.before_run(start, b));
    std::vector<runtime::NamedTensor> feeds;
    for (auto& [name, tensor] : b.inputs) feeds.push_back({name, std::move(tensor)});
    auto outputs = interpreter.Run(feeds, run_options);
    if (!outputs.ok()) {
      return outputs.status().WithContext(fmt::format("samples {}-{}", start, start + count - 1));
    }
    if (hooks.after_run) QK_RETURN_IF_ERROR(hooks.after_run(start, *outputs));
    progress.Advance(count);
    start += count;
  }
  QK_RETURN_IF_NOT(start > 0, StatusCode::kInvalidArgument, "the data holds no samples");
  progress.Finish();
  return start;
}

Status RunPass(const runtime::Interpreter& interpreter, const data::Source& source,
               const PassOptions& options, const std::vector<runtime::Observer*>& observers,
               const PassHooks& hooks) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", options.batch_size);
  QK_RETURN_IF_NOT(source.num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source.Describe());
  return RunBatches(interpreter, ReadInOrder(source, options), source.num_samples(), options, observers,
                    hooks)
      .status();
}

}  // namespace quantkit::analysis
