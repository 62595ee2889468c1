// The public API's data path (include/quantkit/data_source.h, calibration.h): caller arrays as
// ir::Tensor views checked by the data layer (data::ConformBatch: the CLI's rules and messages),
// data specs as streams (OpenDataSpec), and the one statistics pass over caller data,
// StatisticsCollector (push), which CollectStatistics(BatchStream) (pull) feeds.
#include <fmt/format.h>

#include <algorithm>

#include "analysis/collect_pass.h"
#include "common/check.h"
#include "common/progress.h"
#include "common/sha256.h"
#include "data/image_options.h"
#include "data/run_chunks.h"
#include "pipelines/calibration_stages.h"
#include "api/internal.h"
#include "quantkit/calibration.h"
#include "runtime/interpreter.h"

namespace quantkit {

namespace {

using pipelines::RequireValid;

constexpr ElementType kElementTypes[] = {
    ElementType::kFloat32, ElementType::kFloat16, ElementType::kFloat64, ElementType::kInt8,
    ElementType::kUint8,   ElementType::kInt32,   ElementType::kInt64,   ElementType::kBool,
    ElementType::kInt16,   ElementType::kUint16,  ElementType::kUint32,  ElementType::kUint64};

Result<ir::DType> ToDType(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return ir::DType::kFloat;
    case ElementType::kFloat16:
      return ir::DType::kFloat16;
    case ElementType::kFloat64:
      return ir::DType::kDouble;
    case ElementType::kInt8:
      return ir::DType::kInt8;
    case ElementType::kUint8:
      return ir::DType::kUint8;
    case ElementType::kInt32:
      return ir::DType::kInt32;
    case ElementType::kInt64:
      return ir::DType::kInt64;
    case ElementType::kBool:
      return ir::DType::kBool;
    case ElementType::kInt16:
      return ir::DType::kInt16;
    case ElementType::kUint16:
      return ir::DType::kUint16;
    case ElementType::kUint32:
      return ir::DType::kUint32;
    case ElementType::kUint64:
      return ir::DType::kUint64;
  }
  return Status(StatusCode::kInvalidArgument, "unknown element type");
}

Result<ElementType> FromDType(ir::DType dtype) {
  for (ElementType t : kElementTypes) {
    if (*ToDType(t) == dtype) return t;
  }
  return MakeStatus(StatusCode::kUnsupported, "element type {} has no public equivalent",
                    ir::DTypeName(dtype));
}

// Bytes of a caller's array, kept alive by the caller's handle: no copy.
class BorrowedBuffer final : public ir::Buffer {
 public:
  BorrowedBuffer(const void* data, size_t size, std::shared_ptr<const void> owner)
      : data_(static_cast<const uint8_t*>(data)), size_(size), owner_(std::move(owner)) {}
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// One caller array as an ir::Tensor over the caller's bytes (what the array is, not what the
// model wants: data::ConformBatch checks that).
Result<ir::Tensor> BorrowArray(const ArrayView& array, const std::string& what) {
  QK_ASSIGN_OR_RETURN(ir::DType dtype, ToDType(array.type));
  int64_t numel = 1;
  for (int64_t d : array.shape) {
    QK_RETURN_IF_NOT(d >= 0, StatusCode::kInvalidArgument, "{}: negative dimension in {}", what,
                     ShapeText(array.shape));
    numel *= d;
  }
  QK_RETURN_IF_NOT(array.data != nullptr || numel == 0, StatusCode::kInvalidArgument, "{}: no data",
                   what);
  const size_t bytes = ir::StorageBytes(dtype, numel);
  return ir::Tensor(dtype, array.shape,
                    std::make_shared<BorrowedBuffer>(array.data, bytes, array.keep_alive), 0);
}

// A tensor as a public view; the view owns the tensor (and so its bytes).
Result<ArrayView> ViewOf(ir::Tensor tensor) {
  auto owned = std::make_shared<ir::Tensor>(std::move(tensor));
  QK_ASSIGN_OR_RETURN(ElementType type, FromDType(owned->dtype()));
  return ArrayView{type, owned->dims(), owned->data(), owned};
}

// A batch as public views (each view owns its tensor).
Result<InputBatch> ToInputBatch(data::Batch batch) {
  InputBatch out;
  for (auto& [name, tensor] : batch.inputs) {
    QK_ASSIGN_OR_RETURN(ArrayView view, ViewOf(std::move(tensor)));
    out.inputs.emplace(name, std::move(view));
  }
  if (batch.labels) {
    QK_ASSIGN_OR_RETURN(ArrayView labels, ViewOf(std::move(*batch.labels)));
    out.labels = std::move(labels);
  }
  return out;
}

// A caller's batch checked against the model inputs by the data layer (data::ConformBatch, the
// CLI's rules and messages; `origin` names the batch), labels by their contract.
Result<data::Batch> ToBatch(const InputBatch& in, const std::vector<data::InputSpec>& inputs,
                            const std::string& origin) {
  std::vector<std::pair<std::string, ir::Tensor>> arrays;
  for (const auto& [name, array] : in.inputs) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t,
                        BorrowArray(array, fmt::format("{}: input '{}'", origin, name)));
    arrays.emplace_back(name, std::move(t));
  }
  QK_ASSIGN_OR_RETURN(data::Batch batch, data::ConformBatch(std::move(arrays), inputs, origin));
  if (in.labels) {
    QK_ASSIGN_OR_RETURN(ir::Tensor labels, BorrowArray(*in.labels, origin + " labels"));
    QK_RETURN_IF_NOT(
        labels.dtype() == ir::DType::kInt64 && labels.rank() == 1 && labels.dims()[0] == batch.size,
        StatusCode::kInvalidArgument, "{} labels: {} of shape {}, expected int64 [{}]", origin,
        ir::DTypeName(labels.dtype()), ShapeText(labels.dims()), batch.size);
    batch.labels = std::move(labels);
  }
  return batch;
}

// A data::Source read in order as a public stream (the CLI's data specs for library callers).
class SourceStream final : public BatchStream {
 public:
  SourceStream(std::unique_ptr<data::Source> source, int64_t batch_size)
      : source_(std::move(source)), batch_size_(batch_size) {}
  Result<std::optional<InputBatch>> Next() override {
    if (next_ >= source_->num_samples()) return std::optional<InputBatch>();
    const int64_t count = std::min(batch_size_, source_->num_samples() - next_);
    QK_ASSIGN_OR_RETURN(data::Batch batch, source_->Read(next_, count));
    next_ += count;
    QK_ASSIGN_OR_RETURN(InputBatch out, ToInputBatch(std::move(batch)));
    return std::optional<InputBatch>(std::move(out));
  }
  std::string Describe() const override { return source_->Describe(); }
  int64_t size_hint() const override { return source_->num_samples(); }

 private:
  std::unique_ptr<data::Source> source_;
  int64_t batch_size_;
  int64_t next_ = 0;
};

Result<std::unique_ptr<data::Source>> OpenSpec(const Model& model, const std::string& spec,
                                               const DataSpecOptions& options) {
  QK_ASSIGN_OR_RETURN(data::ImageOptions image, pipelines::ToImageOptions(options.image));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(spec, data::ModelInputs(*model.impl().loaded.model), image));
  return data::Take(std::move(source), options.samples);
}

}  // namespace

const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kFloat16:
      return "float16";
    case ElementType::kFloat64:
      return "float64";
    case ElementType::kInt8:
      return "int8";
    case ElementType::kUint8:
      return "uint8";
    case ElementType::kInt32:
      return "int32";
    case ElementType::kInt64:
      return "int64";
    case ElementType::kBool:
      return "bool";
    case ElementType::kInt16:
      return "int16";
    case ElementType::kUint16:
      return "uint16";
    case ElementType::kUint32:
      return "uint32";
    case ElementType::kUint64:
      return "uint64";
  }
  return "unknown";
}

Result<std::unique_ptr<BatchStream>> OpenDataSpec(const Model& model, const std::string& spec,
                                                  const DataSpecOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "batch size must be positive, got {}", options.batch_size);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, OpenSpec(model, spec, options));
  return std::unique_ptr<BatchStream>(new SourceStream(std::move(source), options.batch_size));
}

// ---- StatisticsCollector -----------------------------------------------------------------------

struct StatisticsCollector::Impl {
  Model model;  // the interpreter runs its graph
  std::vector<data::InputSpec> inputs;
  std::vector<std::string> input_names;
  pipelines::Statistics result;  // the collectors; `samples` counts what was observed
  std::unique_ptr<runtime::Interpreter> interpreter;
  std::unique_ptr<analysis::CollectingObserver> observer;
  std::unique_ptr<data::RunChunker> chunker;  // the caller's batches -> model runs
  std::unique_ptr<Progress> progress;
  bool show_progress = false;
  Sha256 data_hash;  // over every byte observed, in order
  int64_t batches = 0;
  int64_t run_samples = 0;  // samples run so far (error messages)
  bool from_spec = false;   // ObserveDataSpec set the description and fingerprint
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
  Result<pipelines::Statistics> Finish() {
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

StatisticsCollector::StatisticsCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StatisticsCollector::StatisticsCollector(StatisticsCollector&&) noexcept = default;
StatisticsCollector& StatisticsCollector::operator=(StatisticsCollector&&) noexcept = default;
StatisticsCollector::~StatisticsCollector() = default;

Result<StatisticsCollector> StatisticsCollector::Create(const Model& model, const Sites& sites,
                                                        const CollectOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  QK_RETURN_IF_NOT(sites.model.valid() && &sites.model.impl() == &model.impl(),
                   StatusCode::kInvalidArgument, "the sites were found on another model than {}",
                   model.path());
  return Create(model, sites.placement, options);
}

Result<StatisticsCollector> StatisticsCollector::Create(const Model& model,
                                                        const Placement& placement,
                                                        const CollectOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  QK_RETURN_IF_NOT(options.run_batch >= 0, StatusCode::kInvalidArgument,
                   "run_batch must be >= 0, got {}", options.run_batch);
  const pipelines::LoadedModel& loaded = model.impl().loaded;
  QK_ASSIGN_OR_RETURN(
      pipelines::CalibrationSites sites,
      pipelines::FindCalibrationSites(loaded, pipelines::ToPlacementOptions(placement)));
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->inputs = data::ModelInputs(*loaded.model);
  for (const data::InputSpec& in : impl->inputs) impl->input_names.push_back(in.name);
  impl->result.stats.model_sha256 = loaded.sha256;
  for (const std::string& name : sites.activations)
    impl->result.stats.tensors.emplace(name, quant::TensorCollector());
  QK_ASSIGN_OR_RETURN(impl->interpreter, runtime::Interpreter::Create(loaded.model));
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
  return StatisticsCollector(std::move(impl));
}

const std::vector<std::string>& StatisticsCollector::input_names() const {
  return impl_->input_names;
}
int64_t StatisticsCollector::samples() const { return impl_->result.samples; }
int64_t StatisticsCollector::batches() const { return impl_->batches; }
int64_t StatisticsCollector::run_batch() const { return impl_->chunker->run_batch(); }

Status StatisticsCollector::Observe(const InputBatch& batch) {
  Impl& s = *impl_;
  QK_RETURN_IF_ERROR(s.CheckOpen());
  QK_RETURN_IF_ERROR(s.CheckNotMixed(s.from_spec));
  const std::string origin = fmt::format("batch {}", s.batches);
  QK_ASSIGN_OR_RETURN(data::Batch b, ToBatch(batch, s.inputs, origin));
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

Status StatisticsCollector::ObserveDataSpec(const std::string& spec,
                                            const DataSpecOptions& options) {
  Impl& s = *impl_;
  QK_RETURN_IF_ERROR(s.CheckOpen());
  QK_RETURN_IF_ERROR(s.CheckNotMixed(s.from_spec || s.result.samples > 0));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, OpenSpec(s.model, spec, options));
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "batch size must be positive, got {}", options.batch_size);
  QK_RETURN_IF_NOT(source->num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source->Describe());
  analysis::PassOptions pass;
  pass.batch_size = options.batch_size;
  pass.run_batch = s.chunker->run_batch();
  pass.progress = s.show_progress;  // RunBatches draws the bar of a spec; ours stays silent
  s.progress->set_enabled(false);
  // The CLI's reads and runs (pipelines/calibrate.cc CollectShard).
  const analysis::BatchReader runs = analysis::ReadRuns(*source, pass, s.inputs);
  QK_ASSIGN_OR_RETURN(
      s.result.samples,
      analysis::RunBatches(*s.interpreter, runs, source->num_samples(), pass, {s.observer.get()}));
  s.from_spec = true;
  s.result.data_description = source->Describe();
  s.result.data_fingerprint = source->Fingerprint();
  return Status::Ok();
}

Result<InputBatch> StatisticsCollector::Conform(const InputBatch& batch) const {
  QK_ASSIGN_OR_RETURN(data::Batch b, ToBatch(batch, impl_->inputs, "batch"));
  return ToInputBatch(std::move(b));
}

Result<Statistics> StatisticsCollector::Finish(const std::string& description) {
  QK_ASSIGN_OR_RETURN(pipelines::Statistics s, impl_->Finish());
  if (!impl_->from_spec) {
    s.data_description =
        fmt::format("{} ({} samples in {} batches)", description, s.samples, impl_->batches);
    s.data_fingerprint = "sha256:" + impl_->data_hash.HexDigest();
  }
  return pipelines::MakePublicStatistics(std::move(s));
}

Result<Statistics> CollectStatistics(const Model& model, BatchStream& stream, const Sites& sites,
                                     const CollectOptions& options) {
  CollectOptions collect = options;
  collect.expected_samples = std::max<int64_t>(stream.size_hint(), 0);
  QK_ASSIGN_OR_RETURN(StatisticsCollector collector,
                      StatisticsCollector::Create(model, sites, collect));
  while (true) {
    QK_ASSIGN_OR_RETURN(std::optional<InputBatch> batch, stream.Next());
    if (!batch) break;
    QK_RETURN_IF_ERROR(collector.Observe(*batch));
  }
  QK_ASSIGN_OR_RETURN(pipelines::Statistics s, collector.impl().Finish());
  s.data_description = stream.Describe();
  s.data_fingerprint = "stream: " + stream.Describe();
  return pipelines::MakePublicStatistics(std::move(s));
}

}  // namespace quantkit
