#include "stats_collector.h"

#include <fmt/format.h>

#include "analysis/model_loading.h"
#include "arrays.h"
#include "common/check.h"
#include "pipelines/calibration_stages.h"
#include "errors.h"

namespace py = pybind11;

namespace quantkit::python {

StatsCollector::StatsCollector(const std::string& model, const passes::PlacementOptions& placement,
                               int64_t expected_samples, bool progress, std::optional<int64_t> run_batch) {
  stats_.model_sha256 = Unwrap(Sha256OfFile(model));
  ir::Model m = Unwrap(analysis::LoadModelForQuantization(model));
  const std::vector<passes::QdqSite> sites = Unwrap(passes::FindQdqSites(*m.graph, placement));
  for (const std::string& name : passes::ActivationTensors(sites)) {
    stats_.tensors.emplace(name, quant::TensorCollector());
  }
  inputs_ = data::ModelInputs(m);
  if (run_batch && *run_batch <= 0) {
    throw StatusError(Status(StatusCode::kInvalidArgument, fmt::format("run_batch must be positive, got {}", *run_batch)));
  }
  chunker_ = std::make_unique<data::RunChunker>(pipelines::CalibrationRunBatch(inputs_, run_batch), inputs_);
  for (const data::InputSpec& in : inputs_) input_names_.push_back(in.name);
  interpreter_ = Unwrap(runtime::Interpreter::Create(std::move(m)));
  observer_ = std::make_unique<analysis::CollectingObserver>(&stats_.tensors);
  progress_ = std::make_unique<Progress>("calibrate", expected_samples, "samples");
  if (!progress) progress_->set_enabled(false);
}

const std::vector<std::string>& StatsCollector::input_names() const { return input_names_; }

void StatsCollector::CheckOpen() const {
  if (finished_) {
    throw StatusError(Status(StatusCode::kInvalidArgument, "the statistics pass is already finished"));
  }
}

data::Batch StatsCollector::Conform(const py::dict& batch, const std::string& origin) const {
  return Unwrap(data::ConformBatch(TensorsFromDict(batch, origin), inputs_, origin));
}

void StatsCollector::Observe(const py::dict& batch) {
  CheckOpen();
  const std::string origin = fmt::format("batch {}", batches_);
  data::Batch b = Conform(batch, origin);
  const int64_t size = b.size;
  Status status;
  {
    py::gil_scoped_release release;
    for (const auto& [name, tensor] : b.inputs) data_hash_.Update(tensor.data(), tensor.nbytes());
    std::vector<data::Batch> runs = chunker_->Add(b);
    b.inputs.clear();
    status = RunAll(std::move(runs)).WithContext(origin);
    // The last references to the arrays go with the GIL re-taken by the buffer; samples of this
    // batch held back for the next run keep theirs until then.
  }
  ThrowIfError(status);
  samples_ += size;
  ++batches_;
  progress_->Advance(size);
}

Status StatsCollector::RunAll(std::vector<data::Batch> runs) {
  runtime::RunOptions options;
  options.observers = {observer_.get()};
  for (data::Batch& run : runs) {
    const int64_t size = run.size;
    std::vector<runtime::NamedTensor> feeds;
    for (auto& [name, tensor] : run.inputs) feeds.push_back({name, std::move(tensor)});
    auto outputs = interpreter_->Run(feeds, options);
    if (!outputs.ok()) {
      return outputs.status().WithContext(fmt::format("samples {}-{}", run_samples_, run_samples_ + size - 1));
    }
    run_samples_ += size;
  }
  return Status::Ok();
}

void StatsCollector::ObserveSource(const std::string& spec, const data::ImageOptions& image,
                                   int64_t samples, int64_t batch_size) {
  CheckOpen();
  if (samples_ > 0) {
    throw StatusError(Status(StatusCode::kInvalidArgument,
                             "a data spec is read whole: do not mix it with Python batches in one pass"));
  }
  Status status;
  {
    py::gil_scoped_release release;
    status = [&]() -> Status {
      QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, data::OpenSource(spec, inputs_, image));
      source = data::Take(std::move(source), samples);
      source_description_ = source->Describe();
      source_fingerprint_ = source->Fingerprint();
      QK_RETURN_IF_NOT(batch_size > 0, StatusCode::kInvalidArgument, "batch size must be positive, got {}",
                       batch_size);
      QK_RETURN_IF_NOT(source->num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                       source->Describe());
      analysis::PassOptions pass;
      pass.batch_size = batch_size;
      pass.run_batch = chunker_->run_batch();
      pass.progress = false;  // RunBatches draws its own bar; ours stays silent for a spec
      progress_->set_enabled(false);
      // The CLI's reads and runs (pipelines/calibrate.cc CollectShard).
      const analysis::BatchReader runs = analysis::InRuns(analysis::ReadInOrder(*source, pass),
                                                          data::RunChunker(chunker_->run_batch(), inputs_));
      QK_RETURN_IF_ERROR(
          analysis::RunBatches(*interpreter_, runs, source->num_samples(), pass, {observer_.get()}).status());
      samples_ += source->num_samples();
      return Status::Ok();
    }();
  }
  ThrowIfError(status);
}

pipelines::Statistics StatsCollector::Finish(const std::string& description) {
  CheckOpen();
  finished_ = true;
  Status status;
  if (std::optional<data::Batch> rest = chunker_->Finish()) {
    py::gil_scoped_release release;
    std::vector<data::Batch> runs;
    runs.push_back(std::move(*rest));
    status = RunAll(std::move(runs));
  }
  ThrowIfError(status);
  progress_->Finish();
  pipelines::Statistics shared;
  shared.stats = stats_;
  shared.samples = samples_;
  if (!source_description_.empty()) {
    shared.data_description = source_description_;
    shared.data_fingerprint = source_fingerprint_;
  } else {
    shared.data_description = fmt::format("{} ({} samples in {} batches)", description, samples_, batches_);
    shared.data_fingerprint = "sha256:" + data_hash_.HexDigest();
  }
  return shared;
}

std::vector<std::pair<std::string, uintptr_t>> StatsCollector::ConformedPointers(const py::dict& batch) const {
  data::Batch b = Conform(batch, "batch");
  std::vector<std::pair<std::string, uintptr_t>> out;
  for (const auto& [name, t] : b.inputs) out.emplace_back(name, reinterpret_cast<uintptr_t>(t.data()));
  return out;
}

}  // namespace quantkit::python
