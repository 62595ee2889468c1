#include "stats_collector.h"

#include <fmt/format.h>

#include "analysis/model_loading.h"
#include "arrays.h"
#include "common/check.h"
#include "data/sample_split.h"
#include "errors.h"

namespace py = pybind11;

namespace quantkit::python {

StatsCollector::StatsCollector(const std::string& model, const passes::PlacementOptions& placement,
                               int64_t expected_samples, bool progress) {
  stats_.model_sha256 = Unwrap(Sha256OfFile(model));
  ir::Model m = Unwrap(analysis::LoadModelForQuantization(model));
  const std::vector<passes::QdqSite> sites = Unwrap(passes::FindQdqSites(*m.graph, placement));
  for (const std::string& name : passes::ActivationTensors(sites)) {
    stats_.tensors.emplace(name, quant::TensorCollector());
  }
  inputs_ = data::ModelInputs(m);
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
    runtime::RunOptions options;
    options.observers = {observer_.get()};
    // One sample per model run, as the CLI's calibration (analysis::kSampleExactRunBatch): the
    // statistics then do not depend on how the caller batched the data (data/sample_split.h).
    std::vector<data::Batch> samples = data::SplitIntoSamples(b, inputs_);
    b.inputs.clear();
    for (size_t i = 0; i < samples.size() && status.ok(); ++i) {
      std::vector<runtime::NamedTensor> sample;
      for (auto& [name, tensor] : samples[i].inputs) sample.push_back({name, std::move(tensor)});
      auto outputs = interpreter_->Run(sample, options);
      if (!outputs.ok()) {
        status = outputs.status().WithContext(fmt::format("{} (sample {})", origin, samples_ + static_cast<int64_t>(i)));
      }
    }
    samples.clear();  // the last references to the arrays go with the GIL re-taken by the buffer
  }
  ThrowIfError(status);
  samples_ += size;
  ++batches_;
  progress_->Advance(size);
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
      analysis::PassOptions pass;
      pass.batch_size = batch_size;
      pass.progress = false;  // RunPass draws its own bar; ours stays silent for a spec
      progress_->set_enabled(false);
      QK_RETURN_IF_ERROR(analysis::RunPass(*interpreter_, *source, pass, {observer_.get()}));
      samples_ += source->num_samples();
      return Status::Ok();
    }();
  }
  ThrowIfError(status);
}

pipelines::Statistics StatsCollector::Finish(const std::string& description) {
  CheckOpen();
  finished_ = true;
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
