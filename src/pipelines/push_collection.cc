#include "pipelines/push_collection.h"

#include <fmt/format.h>

#include <optional>

#include "analysis/collect_pass.h"
#include "common/check.h"
#include "common/progress.h"
#include "common/sha256.h"
#include "data/run_chunks.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {

struct PushCollection::Impl {
  LoadedModel model;  // keeps the graph the interpreter runs alive
  std::vector<data::InputSpec> inputs;
  Statistics result;  // the collectors; `samples` counts what was observed
  std::unique_ptr<runtime::Interpreter> interpreter;
  std::unique_ptr<analysis::CollectingObserver> observer;
  std::unique_ptr<data::RunChunker> chunker;  // the caller's batches -> model runs
  std::unique_ptr<Progress> progress;
  bool show_progress = false;
  Sha256 data_hash;  // over every byte observed, in order
  int64_t batches = 0;
  int64_t run_samples = 0;   // samples run so far (error messages)
  bool from_source = false;  // ObserveSource set the description and fingerprint
  bool finished = false;

  Status CheckOpen() const {
    QK_RETURN_IF_NOT(!finished, StatusCode::kInvalidArgument,
                     "the statistics pass is already finished");
    return Status::Ok();
  }
  // A data spec is read whole: refused when the pass has `other` data.
  static Status CheckNotMixed(bool other) {
    QK_RETURN_IF_NOT(!other, StatusCode::kInvalidArgument,
                     "a data spec is read whole: do not mix it with other batches in one pass");
    return Status::Ok();
  }

  // Runs the model on each run; errors name the run's samples.
  Status RunAll(std::vector<data::Batch> runs) {
    runtime::RunOptions options;
    options.observers = {observer.get()};
    for (data::Batch& run : runs) {
      const int64_t size = run.size;
      std::vector<runtime::NamedTensor> feeds;
      for (auto& [name, tensor] : run.inputs) feeds.push_back({name, std::move(tensor)});
      auto outputs = interpreter->Run(feeds, options);
      if (!outputs.ok()) {
        return outputs.status().WithContext(
            fmt::format("samples {}-{}", run_samples, run_samples + size - 1));
      }
      run_samples += size;
    }
    return Status::Ok();
  }

  // Runs the samples held back and closes the pass; the caller describes the data.
  Result<Statistics> Finish() {
    QK_RETURN_IF_ERROR(CheckOpen());
    finished = true;
    if (std::optional<data::Batch> rest = chunker->Finish()) {
      std::vector<data::Batch> runs;
      runs.push_back(std::move(*rest));
      QK_RETURN_IF_ERROR(RunAll(std::move(runs)));
    }
    QK_RETURN_IF_NOT(result.samples > 0, StatusCode::kInvalidArgument, "the data holds no samples");
    progress->Finish();
    return std::move(result);
  }
};

PushCollection::PushCollection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PushCollection::~PushCollection() = default;

Result<std::unique_ptr<PushCollection>> PushCollection::Create(
    const LoadedModel& model, const passes::PlacementOptions& placement,
    const PushCollectionOptions& options) {
  QK_RETURN_IF_NOT(options.run_batch >= 0, StatusCode::kInvalidArgument,
                   "run_batch must be >= 0, got {}", options.run_batch);
  QK_ASSIGN_OR_RETURN(CalibrationSites sites, FindCalibrationSites(model, placement));
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->inputs = data::ModelInputs(*model.model);
  impl->result.stats.model_sha256 = model.sha256;
  for (const std::string& name : sites.activations)
    impl->result.stats.tensors.emplace(name, quant::TensorCollector());
  QK_ASSIGN_OR_RETURN(impl->interpreter, runtime::Interpreter::Create(model.model));
  impl->observer = std::make_unique<analysis::CollectingObserver>(&impl->result.stats.tensors);
  // Runs as the CLI's calibration cuts them (data/run_chunks.h), whatever the caller's batches.
  impl->chunker = std::make_unique<data::RunChunker>(
      analysis::CalibrationRunBatch(impl->inputs, options.run_batch > 0
                                                      ? std::optional<int64_t>(options.run_batch)
                                                      : std::nullopt),
      impl->inputs);
  impl->show_progress = options.progress;
  impl->progress = std::make_unique<Progress>("calibrate", options.expected_samples, "samples");
  if (!options.progress) impl->progress->set_enabled(false);
  return std::unique_ptr<PushCollection>(new PushCollection(std::move(impl)));
}

const std::vector<data::InputSpec>& PushCollection::inputs() const { return impl_->inputs; }
int64_t PushCollection::samples() const { return impl_->result.samples; }
int64_t PushCollection::batches() const { return impl_->batches; }
int64_t PushCollection::run_batch() const { return impl_->chunker->run_batch(); }

Status PushCollection::CanObserve() const {
  QK_RETURN_IF_ERROR(impl_->CheckOpen());
  return impl_->CheckNotMixed(impl_->from_source);
}

Status PushCollection::CanObserveSource() const {
  QK_RETURN_IF_ERROR(impl_->CheckOpen());
  return impl_->CheckNotMixed(impl_->from_source || impl_->result.samples > 0);
}

Status PushCollection::Observe(data::Batch b, const std::string& origin) {
  Impl& s = *impl_;
  QK_RETURN_IF_ERROR(CanObserve());
  for (const auto& [name, tensor] : b.inputs) s.data_hash.Update(tensor.data(), tensor.nbytes());
  std::vector<data::Batch> runs = s.chunker->Add(b);
  const int64_t size = b.size;
  b = data::Batch();  // samples held back for the next run keep their arrays alive until then
  QK_RETURN_IF_ERROR(s.RunAll(std::move(runs)).WithContext(origin));
  s.result.samples += size;
  ++s.batches;
  s.progress->Advance(size);
  return Status::Ok();
}

Status PushCollection::ObserveSource(const data::Source& source, int64_t batch_size) {
  Impl& s = *impl_;
  QK_RETURN_IF_ERROR(CanObserveSource());
  QK_RETURN_IF_NOT(batch_size > 0, StatusCode::kInvalidArgument,
                   "batch size must be positive, got {}", batch_size);
  QK_RETURN_IF_NOT(source.num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source.Describe());
  analysis::PassOptions pass;
  pass.batch_size = batch_size;
  pass.run_batch = s.chunker->run_batch();
  pass.progress = s.show_progress;  // RunBatches draws the bar of a spec; ours stays silent
  s.progress->set_enabled(false);
  // The CLI's reads and runs (pipelines/calibrate/calibrate.cc CollectShard).
  const analysis::BatchReader runs = analysis::ReadRuns(source, pass, s.inputs);
  QK_ASSIGN_OR_RETURN(
      s.result.samples,
      analysis::RunBatches(*s.interpreter, runs, source.num_samples(), pass, {s.observer.get()}));
  s.from_source = true;
  s.result.data_description = source.Describe();
  s.result.data_fingerprint = source.Fingerprint();
  return Status::Ok();
}

Result<Statistics> PushCollection::Finish(const std::string& description) {
  const bool from_source = impl_->from_source;
  QK_ASSIGN_OR_RETURN(Statistics s, impl_->Finish());
  if (!from_source) {
    s.data_description =
        fmt::format("{} ({} samples in {} batches)", description, s.samples, impl_->batches);
    s.data_fingerprint = "sha256:" + impl_->data_hash.HexDigest();
  }
  return s;
}

Result<Statistics> PushCollection::Finish(const std::string& description,
                                          const std::string& fingerprint) {
  QK_ASSIGN_OR_RETURN(Statistics s, impl_->Finish());
  s.data_description = description;
  s.data_fingerprint = fingerprint;
  return s;
}

}  // namespace quantkit::pipelines
