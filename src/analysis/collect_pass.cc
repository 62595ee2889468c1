#include "analysis/collect_pass.h"

#include <fmt/format.h>

#include <algorithm>

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

Status RunPass(const runtime::Interpreter& interpreter, const data::Source& source,
               const PassOptions& options, const std::vector<runtime::Observer*>& observers,
               const PassHooks& hooks) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", options.batch_size);
  const int64_t n = source.num_samples();
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: no samples", source.Describe());
  runtime::RunOptions run_options;
  run_options.observers = observers;
  Progress progress(options.label, n, "samples");
  if (!options.progress) progress.set_enabled(false);
  // A model with a fixed batch dim caps the batch; samples that do not stack (varying shapes)
  // run in runs of equal shapes (data::ReadStackable), so no batch size has to be chosen by hand.
  const int64_t batch_size = data::EffectiveBatchSize(source, options.batch_size);
  for (int64_t start = 0; start < n;) {
    int64_t count = std::min(options.run_batch > 0 ? std::min(batch_size, options.run_batch) : batch_size,
                             n - start);
    if (options.chunk_size > 0) {
      count = std::min(count, options.chunk_size - start % options.chunk_size);
    }
    QK_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, data::ReadStackable(source, start, count));
    for (data::Batch& batch : batches) {
      const int64_t size = batch.size;
      if (hooks.before_run) QK_RETURN_IF_ERROR(hooks.before_run(start, batch));
      std::vector<runtime::NamedTensor> feeds;
      for (auto& [name, tensor] : batch.inputs) feeds.push_back({name, std::move(tensor)});
      auto outputs = interpreter.Run(feeds, run_options);
      if (!outputs.ok()) {
        return outputs.status().WithContext(fmt::format("samples {}-{}", start, start + size - 1));
      }
      if (hooks.after_run) QK_RETURN_IF_ERROR(hooks.after_run(start, *outputs));
      progress.Advance(size);
      start += size;
    }
  }
  progress.Finish();
  return Status::Ok();
}

}  // namespace quantkit::analysis
