// The public API's data path (include/quantkit/data_source.h, calibration.h): caller arrays as
// ir::Tensor views checked by the data layer (data::ConformBatch: the CLI's rules and messages),
// data specs as streams (OpenDataSpec), and StatisticsCollector (push), which
// CollectStatistics(BatchStream) (pull) feeds: converted batches handed to the one statistics
// pass over caller data, pipelines::PushCollection.
#include <fmt/format.h>

#include <algorithm>

#include "api/internal.h"
#include "common/check.h"
#include "data/image_options.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/push_collection.h"
#include "quantkit/calibration.h"

namespace quantkit {

namespace {

using api::RequireValid;

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
  QK_ASSIGN_OR_RETURN(data::ImageOptions image, api::ToImageOptions(options.image));
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

// ---- StatisticsCollector: the push pass of pipelines/push_collection.h over converted batches
// ----

struct StatisticsCollector::Impl {
  Model model;  // the handle keeps the loaded model alive; OpenSpec reads its inputs
  std::vector<std::string> input_names;
  std::unique_ptr<pipelines::PushCollection> pass;
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
  pipelines::PushCollectionOptions o;
  o.run_batch = options.run_batch;
  o.expected_samples = options.expected_samples;
  o.progress = options.progress;
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  QK_ASSIGN_OR_RETURN(impl->pass, pipelines::PushCollection::Create(
                                      model.impl().loaded, api::ToPlacementOptions(placement), o));
  for (const data::InputSpec& in : impl->pass->inputs()) impl->input_names.push_back(in.name);
  return StatisticsCollector(std::move(impl));
}

const std::vector<std::string>& StatisticsCollector::input_names() const {
  return impl_->input_names;
}
int64_t StatisticsCollector::samples() const { return impl_->pass->samples(); }
int64_t StatisticsCollector::batches() const { return impl_->pass->batches(); }
int64_t StatisticsCollector::run_batch() const { return impl_->pass->run_batch(); }

Status StatisticsCollector::Observe(const InputBatch& batch) {
  pipelines::PushCollection& pass = *impl_->pass;
  QK_RETURN_IF_ERROR(pass.CanObserve());
  const std::string origin = fmt::format("batch {}", pass.batches());
  QK_ASSIGN_OR_RETURN(data::Batch b, ToBatch(batch, pass.inputs(), origin));
  return pass.Observe(std::move(b), origin);
}

Status StatisticsCollector::ObserveDataSpec(const std::string& spec,
                                            const DataSpecOptions& options) {
  pipelines::PushCollection& pass = *impl_->pass;
  QK_RETURN_IF_ERROR(pass.CanObserveSource());
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, OpenSpec(impl_->model, spec, options));
  return pass.ObserveSource(*source, options.batch_size);
}

Result<InputBatch> StatisticsCollector::Conform(const InputBatch& batch) const {
  QK_ASSIGN_OR_RETURN(data::Batch b, ToBatch(batch, impl_->pass->inputs(), "batch"));
  return ToInputBatch(std::move(b));
}

Result<Statistics> StatisticsCollector::Finish(const std::string& description) {
  QK_ASSIGN_OR_RETURN(pipelines::Statistics s, impl_->pass->Finish(description));
  return api::MakePublicStatistics(std::move(s));
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
  QK_ASSIGN_OR_RETURN(
      pipelines::Statistics s,
      collector.impl().pass->Finish(stream.Describe(), "stream: " + stream.Describe()));
  return api::MakePublicStatistics(std::move(s));
}

}  // namespace quantkit
