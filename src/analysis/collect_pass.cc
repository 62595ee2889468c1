#include "analysis/collect_pass.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

#include "common/check.h"
#include "common/progress.h"
#include "data/prefetch.h"
#include "runtime/device.h"

namespace quantkit::analysis {

Status CollectingObserver::OnTensor(const std::string& name, const ir::Node* /*producer*/,
                                    const runtime::TensorView& view) {
  auto it = collectors_->find(name);
  if (it == collectors_->end()) return Status::Ok();
  quant::TensorView v{quant::FloatSpan(view.data_as<float>(), static_cast<size_t>(view.numel())),
                      view.shape};
  return it->second.Observe(v).WithContext(fmt::format("tensor '{}'", name));
}

const runtime::TensorStatsRequest* CollectingObserver::StatsRequestFor(
    const std::string& name) const {
  auto it = collectors_->find(name);
  if (it == collectors_->end()) return nullptr;
  runtime::TensorStatsRequest& request = requests_[name];
  request.log2_bins = it->second.histogram().log2_bins();
  request.min_range_exp = quant::kMinRangeExp;
  request.histogram = it->second.has_histogram();
  const std::optional<quant::PerChannelStats> per_channel = it->second.per_channel();
  request.channel_axis.reset();
  if (per_channel) request.channel_axis = per_channel->axis;
  return &request;
}

Status CollectingObserver::OnStats(const std::string& name, const ir::Node* /*producer*/,
                                   const runtime::TensorStats& stats) {
  auto it = collectors_->find(name);
  if (it == collectors_->end()) return Status::Ok();
  const std::string where = fmt::format("tensor '{}'", name);
  Result<quant::TensorCollector> batch =
      CollectorFromStats(stats, it->second.histogram().log2_bins());
  if (!batch.ok()) return batch.status().WithContext(where);
  return it->second.Merge(*batch).WithContext(where);
}

Result<quant::TensorCollector> CollectorFromStats(const runtime::TensorStats& stats,
                                                  int log2_bins) {
  quant::RangeStats range;
  range.count = stats.count;
  range.nan_count = stats.nan_count;
  range.posinf_count = stats.posinf_count;
  range.neginf_count = stats.neginf_count;
  range.zero_count = stats.zero_count;
  range.min = stats.min;
  range.max = stats.max;
  // As RangeCollector::Observe: the abs-max of the finite range, 0 while there is none.
  if (range.min <= range.max) range.amax = std::max(std::fabs(range.min), std::fabs(range.max));
  std::optional<quant::PerChannelStats> per_channel;
  if (stats.has_per_channel) {
    per_channel.emplace();
    per_channel->axis = stats.axis;
    per_channel->amax = stats.channel_amax;
    per_channel->nonfinite_count = stats.channel_nonfinite;
  }
  if (!stats.has_histogram) return quant::TensorCollector::RangeOnly(range, std::move(per_channel));
  std::vector<int64_t> positive = stats.positive, negative = stats.negative;
  if (!stats.has_range) {
    positive.assign(size_t{1} << log2_bins, 0);
    negative.assign(size_t{1} << log2_bins, 0);
  }
  QK_ASSIGN_OR_RETURN(quant::StreamingHistogram histogram,
                      quant::StreamingHistogram::FromParts(
                          log2_bins, stats.has_range, stats.range_exp, std::move(positive),
                          std::move(negative), stats.zero_count, stats.nonfinite_count()));
  return quant::TensorCollector::FromParts(range, std::move(histogram), std::move(per_channel));
}

BatchReader ReadInOrder(const data::Source& source, const PassOptions& options) {
  if (options.batch_size <= 0) {
    const int64_t bad = options.batch_size;
    return [bad]() -> Result<std::optional<data::Batch>> {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("--batch-size must be positive, got {}", bad));
    };
  }
  // A model with a fixed batch dim caps the batch; samples that do not stack (varying shapes)
  // run in runs of equal shapes (data::ReadStackable), so no batch size has to be chosen by hand.
  const int64_t batch_size = ReadSize(source, options);
  // The next range is read on a background thread while the model runs on the current one
  // (data::BatchPrefetcher); its batches are handed out one model run at a time.
  struct State {
    explicit State(const data::Source& source, std::vector<std::pair<int64_t, int64_t>> ranges)
        : reader(source, std::move(ranges)) {}
    data::BatchPrefetcher reader;
    std::deque<data::Batch> pending;
  };
  auto state = std::make_shared<State>(
      source, data::BatchRanges(source.num_samples(), batch_size, options.chunk_size));
  return [state]() -> Result<std::optional<data::Batch>> {
    while (state->pending.empty()) {
      if (!state->reader.HasNext()) return std::optional<data::Batch>();
      QK_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, state->reader.Next());
      for (data::Batch& b : batches) state->pending.push_back(std::move(b));
    }
    data::Batch batch = std::move(state->pending.front());
    state->pending.pop_front();
    return std::optional<data::Batch>(std::move(batch));
  };
}

int64_t CalibrationRunBatch(const std::vector<data::InputSpec>& inputs,
                            std::optional<int64_t> requested) {
  constexpr int64_t kCpuRunBatch = 8, kGpuRunBatch = 128;
  return data::RunBatchFor(
      inputs, requested.value_or(runtime::DefaultDevice().is_cuda() ? kGpuRunBatch : kCpuRunBatch));
}

int64_t ReadSize(const data::Source& source, const PassOptions& options) {
  const int64_t batch_size = data::EffectiveBatchSize(source, options.batch_size);
  if (options.run_batch <= 1) return batch_size;
  return std::max(options.run_batch, batch_size / options.run_batch * options.run_batch);
}

BatchReader InRuns(BatchReader next, data::RunChunker chunker) {
  struct State {
    BatchReader next;
    data::RunChunker chunker;
    std::deque<data::Batch> runs;
    bool done = false;
  };
  auto state = std::make_shared<State>(State{std::move(next), std::move(chunker), {}, false});
  return [state]() -> Result<std::optional<data::Batch>> {
    while (state->runs.empty() && !state->done) {
      QK_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, state->next());
      if (!batch) {
        state->done = true;
        if (std::optional<data::Batch> rest = state->chunker.Finish())
          state->runs.push_back(std::move(*rest));
        break;
      }
      for (data::Batch& run : state->chunker.Add(*batch)) state->runs.push_back(std::move(run));
    }
    if (state->runs.empty()) return std::optional<data::Batch>();
    data::Batch run = std::move(state->runs.front());
    state->runs.pop_front();
    return std::optional<data::Batch>(std::move(run));
  };
}

BatchReader ReadRuns(const data::Source& source, const PassOptions& options,
                     const std::vector<data::InputSpec>& inputs) {
  return InRuns(ReadInOrder(source, options),
                data::RunChunker(options.run_batch, inputs, options.chunk_size));
}

Result<int64_t> RunBatches(const runtime::Interpreter& interpreter, const BatchReader& next,
                           int64_t size_hint, const PassOptions& options,
                           const std::vector<runtime::Observer*>& observers,
                           const PassHooks& hooks) {
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
  return RunBatches(interpreter, ReadInOrder(source, options), source.num_samples(), options,
                    observers, hooks)
      .status();
}

}  // namespace quantkit::analysis
