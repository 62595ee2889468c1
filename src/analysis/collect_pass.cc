#include "analysis/collect_pass.h"

#include <fmt/format.h>

#include <algorithm>
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
  auto start = std::make_shared<int64_t>(0);
  const int64_t n = source.num_samples();
  const int64_t batch_size = options.batch_size, chunk_size = options.chunk_size;
  return [&source, start, n, batch_size, chunk_size]() -> Result<std::optional<data::Batch>> {
    if (*start >= n) return std::optional<data::Batch>();
    int64_t count = std::min(batch_size, n - *start);
    if (chunk_size > 0) count = std::min(count, chunk_size - *start % chunk_size);
    QK_ASSIGN_OR_RETURN(data::Batch batch, source.Read(*start, count));
    *start += count;
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
