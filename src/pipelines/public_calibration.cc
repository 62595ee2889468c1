// include/quantkit/calibration.h over the internal stages (pipelines/calibration_stages.h). The
// handles hold the internal types (pipelines/public_internal.h); this file and that header are
// the only places that convert between them and the public, std-only structs.
#include "quantkit/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "common/check.h"
#include "data/image_options.h"
#include "data/image_options_text.h"
#include "data/run_chunks.h"
#include "formats/plan_files.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/calibration_stages.h"
#include "pipelines/public_internal.h"
#include "quant/method_amax.h"

namespace quantkit {

namespace {

using pipelines::MakePublicPlan;
using pipelines::MakePublicStatistics;
using pipelines::ToPlacementOptions;

TensorScale ToTensorScale(const quant::TensorQuant& t) {
  return TensorScale{t.tensor,
                     t.quantized,
                     t.reason,
                     t.role == quant::TensorRole::kWeight,
                     t.scale,
                     t.amax,
                     t.zero_point,
                     t.axis,
                     t.source,
                     quant::TensorRoleName(t.role),
                     quant::QuantDTypeName(t.dtype)};
}

Artifacts ArtifactsFrom(std::vector<std::string> written, const passes::PassReport& inserted) {
  return Artifacts{std::move(written),
                   static_cast<int>(inserted.Count(passes::counter::kActivationPairs)),
                   static_cast<int>(inserted.Count(passes::counter::kWeightPairs))};
}

Status RequireValid(bool valid, const char* what) {
  QK_RETURN_IF_NOT(valid, StatusCode::kInvalidArgument, "{} is empty (default-constructed)", what);
  return Status::Ok();
}

Result<ir::DType> ToDType(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return ir::DType::kFloat;
    case ElementType::kFloat16: return ir::DType::kFloat16;
    case ElementType::kFloat64: return ir::DType::kDouble;
    case ElementType::kInt8: return ir::DType::kInt8;
    case ElementType::kUint8: return ir::DType::kUint8;
    case ElementType::kInt32: return ir::DType::kInt32;
    case ElementType::kInt64: return ir::DType::kInt64;
    case ElementType::kBool: return ir::DType::kBool;
  }
  return Status(StatusCode::kInvalidArgument, "unknown element type");
}

Result<ElementType> FromDType(ir::DType dtype) {
  for (ElementType t : {ElementType::kFloat32, ElementType::kFloat16, ElementType::kFloat64, ElementType::kInt8,
                        ElementType::kUint8, ElementType::kInt32, ElementType::kInt64, ElementType::kBool}) {
    if (*ToDType(t) == dtype) return t;
  }
  return MakeStatus(StatusCode::kUnsupported, "element type {} has no public equivalent", ir::DTypeName(dtype));
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

// One array of a batch as an ir::Tensor over the caller's bytes, after checking it against the
// model input (dtype, rank, fixed per-sample dims) or the label contract.
Result<ir::Tensor> BorrowArray(const ArrayView& array, const std::string& what, ir::DType want_dtype,
                               const std::vector<int64_t>* model_dims) {
  QK_ASSIGN_OR_RETURN(ir::DType dtype, ToDType(array.type));
  QK_RETURN_IF_NOT(dtype == want_dtype, StatusCode::kInvalidArgument, "{}: {} data, the model expects {}",
                   what, ElementTypeName(array.type), ir::DTypeName(want_dtype));
  QK_RETURN_IF_NOT(!array.shape.empty() && array.shape[0] > 0, StatusCode::kInvalidArgument,
                   "{}: shape {} has no leading batch dimension", what, ShapeText(array.shape));
  int64_t numel = 1;
  for (int64_t d : array.shape) {
    QK_RETURN_IF_NOT(d >= 0, StatusCode::kInvalidArgument, "{}: negative dimension in {}", what,
                     ShapeText(array.shape));
    numel *= d;
  }
  if (model_dims) {
    QK_RETURN_IF_NOT(array.shape.size() == model_dims->size(), StatusCode::kInvalidArgument,
                     "{}: shape {}, the model expects rank {} {}", what, ShapeText(array.shape),
                     model_dims->size(), ShapeText(*model_dims));
    for (size_t i = 1; i < array.shape.size(); ++i) {
      QK_RETURN_IF_NOT((*model_dims)[i] < 0 || (*model_dims)[i] == array.shape[i], StatusCode::kInvalidArgument,
                       "{}: shape {}, the model expects {} (-1: any)", what, ShapeText(array.shape),
                       ShapeText(*model_dims));
    }
  }
  QK_RETURN_IF_NOT(array.data != nullptr || numel == 0, StatusCode::kInvalidArgument, "{}: no data", what);
  const size_t bytes = ir::StorageBytes(dtype, numel);
  return ir::Tensor(dtype, array.shape, std::make_shared<BorrowedBuffer>(array.data, bytes, array.keep_alive), 0);
}

Result<data::Batch> ToBatch(const InputBatch& in, const std::vector<data::InputSpec>& inputs, int64_t index) {
  const std::string where = fmt::format("batch {}", index);
  data::Batch batch;
  for (const auto& [name, array] : in.inputs) {
    bool known = false;
    for (const data::InputSpec& spec : inputs) known |= spec.name == name;
    QK_RETURN_IF_NOT(known, StatusCode::kInvalidArgument, "{}: '{}' is not an input of the model", where, name);
  }
  for (const data::InputSpec& spec : inputs) {
    auto it = in.inputs.find(spec.name);
    QK_RETURN_IF_NOT(it != in.inputs.end(), StatusCode::kInvalidArgument, "{}: model input '{}' is missing",
                     where, spec.name);
    QK_ASSIGN_OR_RETURN(ir::Tensor t, BorrowArray(it->second, where + " input '" + spec.name + "'", spec.dtype,
                                                  &spec.dims));
    if (batch.size == 0) batch.size = t.dims()[0];
    QK_RETURN_IF_NOT(t.dims()[0] == batch.size, StatusCode::kInvalidArgument,
                     "{}: input '{}' has {} samples, other inputs {}", where, spec.name, t.dims()[0], batch.size);
    batch.inputs.emplace_back(spec.name, std::move(t));
  }
  if (in.labels) {
    QK_ASSIGN_OR_RETURN(ir::Tensor labels, BorrowArray(*in.labels, where + " labels", ir::DType::kInt64, nullptr));
    QK_RETURN_IF_NOT(labels.rank() == 1 && labels.dims()[0] == batch.size, StatusCode::kInvalidArgument,
                     "{} labels: shape {}, expected [{}]", where, ShapeText(labels.dims()), batch.size);
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
    InputBatch out;
    for (auto& [name, tensor] : batch.inputs) {
      QK_ASSIGN_OR_RETURN(ArrayView view, View(std::move(tensor)));
      out.inputs.emplace(name, std::move(view));
    }
    if (batch.labels) {
      QK_ASSIGN_OR_RETURN(ArrayView labels, View(std::move(*batch.labels)));
      out.labels = std::move(labels);
    }
    return std::optional<InputBatch>(std::move(out));
  }
  std::string Describe() const override { return source_->Describe(); }
  int64_t size_hint() const override { return source_->num_samples(); }

 private:
  static Result<ArrayView> View(ir::Tensor tensor) {
    auto owned = std::make_shared<ir::Tensor>(std::move(tensor));
    QK_ASSIGN_OR_RETURN(ElementType type, FromDType(owned->dtype()));
    return ArrayView{type, owned->dims(), owned->data(), owned};
  }
  std::unique_ptr<data::Source> source_;
  int64_t batch_size_;
  int64_t next_ = 0;
};

}  // namespace

namespace pipelines {

quantkit::Plan MakePublicPlan(quant::QuantPlan plan) {
  auto impl = std::make_shared<quantkit::Plan::Impl>();
  impl->plan = std::move(plan);
  return quantkit::Plan(std::move(impl));
}

quantkit::Statistics MakePublicStatistics(Statistics statistics) {
  auto impl = std::make_shared<quantkit::Statistics::Impl>();
  impl->statistics = std::move(statistics);
  return quantkit::Statistics(std::move(impl));
}

Result<data::ImageOptions> ToImageOptions(const ImagePreprocessing& p) {
  return data::ParseImageOptions(
      {p.resize, p.center_crop, p.color, p.layout, p.mean, p.std, p.scale});
}

passes::PlacementOptions ToPlacementOptions(const Placement& p) {
  passes::PlacementOptions o;
  o.per_channel_weights = p.per_channel_weights;
  o.quantize_residual_add = p.quantize_residual_add;
  o.exclude_nodes = p.exclude_nodes;
  o.exclude_op_types = p.exclude_op_types;
  return o;
}

Result<MethodChoice> ToMethodChoice(const MethodChoices& choices) {
  MethodChoice out;
  QK_ASSIGN_OR_RETURN(out.method, quant::ParseMethod(choices.method));
  for (const auto& [key, method] : choices.overrides) {
    QK_ASSIGN_OR_RETURN(out.overrides[key], quant::ParseMethod(method));
  }
  return out;
}

Result<formats::TrtCacheWriteOptions> ToTrtCacheOptions(const CacheOptions& cache) {
  formats::TrtCacheWriteOptions out;
  QK_ASSIGN_OR_RETURN(out.version, formats::ParseTrtVersion(cache.trt_version));
  QK_ASSIGN_OR_RETURN(out.calibrator, formats::ParseTrtCalibrator(cache.calibrator));
  return out;
}

}  // namespace pipelines

const char* ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat16: return "float16";
    case ElementType::kFloat64: return "float64";
    case ElementType::kInt8: return "int8";
    case ElementType::kUint8: return "uint8";
    case ElementType::kInt32: return "int32";
    case ElementType::kInt64: return "int64";
    case ElementType::kBool: return "bool";
  }
  return "unknown";
}

// ---- Model -------------------------------------------------------------------------------------

const std::string& Model::path() const { return impl_->loaded.path; }
const std::string& Model::sha256() const { return impl_->loaded.sha256; }
std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (const data::InputSpec& s : data::ModelInputs(*impl_->loaded.model)) names.push_back(s.name);
  return names;
}

Result<Model> LoadModel(const std::string& path) {
  auto impl = std::make_shared<Model::Impl>();
  QK_ASSIGN_OR_RETURN(impl->loaded, pipelines::LoadFloatModel(path));
  return Model(std::move(impl));
}

Result<std::vector<std::string>> ModelInputNames(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(path));
  std::vector<std::string> names;
  for (const data::InputSpec& s : data::ModelInputs(model)) names.push_back(s.name);
  return names;
}

Result<Sites> FindSites(const Model& model, const Placement& placement) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  const ir::Graph& graph = *model.impl().loaded.model->graph;
  for (const std::string& node : placement.exclude_nodes) {
    bool found = false;
    for (const ir::Node* n : graph.nodes()) found |= n->name == node;
    QK_RETURN_IF_NOT(found, StatusCode::kNotFound, "{}: excluded node '{}' is not in the model", model.path(), node);
  }
  QK_ASSIGN_OR_RETURN(
      pipelines::CalibrationSites found,
      pipelines::FindCalibrationSites(model.impl().loaded, ToPlacementOptions(placement)));
  Sites sites;
  sites.model = model;
  sites.placement = placement;
  sites.activations = found.activations;
  for (const passes::QdqSite& s : found.sites) {
    sites.sites.push_back(
        Site{s.tensor, s.consumer->name, s.input_index, s.role == quant::TensorRole::kWeight, s.axis});
  }
  return sites;
}

Result<std::unique_ptr<BatchStream>> OpenDataSpec(const Model& model, const std::string& spec,
                                                  const DataSpecOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument, "batch size must be positive, got {}",
                   options.batch_size);
  QK_ASSIGN_OR_RETURN(data::ImageOptions image, pipelines::ToImageOptions(options.image));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(spec, data::ModelInputs(*model.impl().loaded.model), image));
  source = data::Take(std::move(source), options.samples);
  return std::unique_ptr<BatchStream>(new SourceStream(std::move(source), options.batch_size));
}

// ---- Statistics --------------------------------------------------------------------------------

std::vector<std::string> Statistics::tensors() const {
  std::vector<std::string> names;
  for (const auto& [name, c] : impl_->statistics.stats.tensors) names.push_back(name);
  return names;
}
int64_t Statistics::samples() const { return impl_->statistics.samples; }
const std::string& Statistics::model_sha256() const { return impl_->statistics.stats.model_sha256; }
const std::string& Statistics::data_description() const { return impl_->statistics.data_description; }
const std::string& Statistics::data_fingerprint() const {
  return impl_->statistics.data_fingerprint;
}

Result<float> Statistics::AbsMax(const std::string& tensor) const {
  return Amax(tensor, "max");
}

namespace {

Result<const quant::TensorCollector*> FindCollector(const Statistics& statistics,
                                                    const std::string& tensor) {
  QK_RETURN_IF_ERROR(RequireValid(statistics.valid(), "statistics"));
  const auto& tensors = statistics.impl().statistics.stats.tensors;
  auto it = tensors.find(tensor);
  QK_RETURN_IF_NOT(it != tensors.end(), StatusCode::kNotFound, "no statistics for tensor '{}'",
                   tensor);
  return &it->second;
}

}  // namespace

Result<TensorRange> Statistics::Range(const std::string& tensor) const {
  QK_ASSIGN_OR_RETURN(const quant::TensorCollector* collector, FindCollector(*this, tensor));
  const quant::RangeStats& r = collector->range();
  return TensorRange{r.min, r.max, r.amax, r.count, r.nan_count, r.posinf_count + r.neginf_count};
}

Result<float> Statistics::Amax(const std::string& tensor, const std::string& method) const {
  QK_ASSIGN_OR_RETURN(quant::MethodRequest request, quant::ParseMethod(method));
  QK_ASSIGN_OR_RETURN(const quant::TensorCollector* collector, FindCollector(*this, tensor));
  QK_ASSIGN_OR_RETURN(quant::CalibResult r, quant::AmaxFromCollector(*collector, request));
  return r.amax;
}

Result<std::map<std::string, float>> Statistics::Amax(const std::string& method) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "statistics"));
  QK_ASSIGN_OR_RETURN(quant::MethodRequest request, quant::ParseMethod(method));
  std::map<std::string, float> out;
  for (const auto& [name, collector] : impl_->statistics.stats.tensors) {
    QK_ASSIGN_OR_RETURN(quant::CalibResult r, quant::AmaxFromCollector(collector, request));
    out[name] = r.amax;
  }
  return out;
}

Result<Statistics> Statistics::Merge(const Statistics& other) const {
  QK_RETURN_IF_ERROR(RequireValid(valid() && other.valid(), "statistics"));
  pipelines::Statistics merged = impl_->statistics;
  QK_RETURN_IF_ERROR(formats::MergeStats(&merged.stats, other.impl_->statistics.stats));
  merged.samples += other.impl_->statistics.samples;
  merged.data_description += " + " + other.impl_->statistics.data_description;
  merged.data_fingerprint += " + " + other.impl_->statistics.data_fingerprint;
  return MakePublicStatistics(std::move(merged));
}

std::string Statistics::Serialize() const { return formats::SerializeStats(impl_->statistics.stats); }

Result<Statistics> Statistics::Parse(const std::string& bytes, const std::string& source_name) {
  pipelines::Statistics s;
  QK_ASSIGN_OR_RETURN(s.stats, formats::ParseStats(bytes, source_name));
  s.data_description = "statistics from " + source_name;
  s.data_fingerprint = "qkstats";
  return MakePublicStatistics(std::move(s));
}

Status Statistics::Save(const std::string& path) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "statistics"));
  return formats::WriteStatsFile(path, impl_->statistics.stats);
}

Result<Statistics> Statistics::Load(const std::string& path) {
  return Load(std::vector<std::string>{path});
}

Result<Statistics> Statistics::Load(const std::vector<std::string>& paths,
                                    const std::string& model_sha256) {
  pipelines::Statistics s;
  QK_ASSIGN_OR_RETURN(s.stats, formats::MergeStatsFiles(paths, model_sha256));
  s.data_description = "statistics from";
  for (const std::string& path : paths) s.data_description += " " + path;
  s.data_fingerprint = "qkstats";
  return MakePublicStatistics(std::move(s));
}

Result<Statistics> CollectStatistics(const Model& model, BatchStream& stream, const Sites& sites,
                                     const CollectOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid(), "model"));
  QK_RETURN_IF_NOT(sites.model.valid() && &sites.model.impl() == &model.impl(), StatusCode::kInvalidArgument,
                   "the sites were found on another model than {}", model.path());
  const pipelines::LoadedModel& loaded = model.impl().loaded;
  QK_ASSIGN_OR_RETURN(pipelines::CalibrationSites internal,
                      pipelines::FindCalibrationSites(loaded, ToPlacementOptions(sites.placement)));
  const std::vector<data::InputSpec> inputs = data::ModelInputs(*loaded.model);
  QK_RETURN_IF_NOT(options.run_batch >= 0, StatusCode::kInvalidArgument, "run_batch must be >= 0, got {}",
                   options.run_batch);
  int64_t index = 0;
  analysis::BatchReader batches = [&]() -> Result<std::optional<data::Batch>> {
    QK_ASSIGN_OR_RETURN(std::optional<InputBatch> in, stream.Next());
    if (!in) return std::optional<data::Batch>();
    QK_ASSIGN_OR_RETURN(data::Batch batch, ToBatch(*in, inputs, index++));
    return std::optional<data::Batch>(std::move(batch));
  };
  // Runs as the CLI's calibration cuts them (data/run_chunks.h), whatever the stream's batches.
  const int64_t run_batch = pipelines::CalibrationRunBatch(
      inputs, options.run_batch > 0 ? std::optional<int64_t>(options.run_batch) : std::nullopt);
  const analysis::BatchReader next = analysis::InRuns(batches, data::RunChunker(run_batch, inputs));
  analysis::PassOptions pass;
  pass.progress = options.progress;
  QK_ASSIGN_OR_RETURN(pipelines::Statistics s,
                      pipelines::CollectStatistics(loaded, next, stream.size_hint(), internal, pass));
  s.data_description = stream.Describe();
  s.data_fingerprint = "stream: " + stream.Describe();
  return MakePublicStatistics(std::move(s));
}

// ---- Plan --------------------------------------------------------------------------------------

Plan Plan::Empty() { return MakePublicPlan(quant::QuantPlan{}); }

int64_t Plan::num_quantized() const { return static_cast<int64_t>(impl_->plan.NumQuantized()); }

std::vector<TensorScale> Plan::tensors() const {
  std::vector<TensorScale> out;
  for (const auto& [name, t] : impl_->plan.tensors) out.push_back(ToTensorScale(t));
  return out;
}

std::optional<TensorScale> Plan::Find(const std::string& tensor) const {
  const quant::TensorQuant* t = impl_->plan.Find(tensor);
  if (!t) return std::nullopt;
  return ToTensorScale(*t);
}

std::map<std::string, std::string> Plan::float_nodes() const { return impl_->plan.float_nodes; }
std::string Plan::method() const { return impl_->plan.provenance.method; }

Plan Plan::WithFloatNodes(const std::vector<std::string>& nodes, const std::string& reason) const {
  quant::QuantPlan plan = impl_->plan;
  for (const std::string& n : nodes) plan.float_nodes[n] = reason;
  return MakePublicPlan(std::move(plan));
}

Result<Plan> Plan::WithActivationAmax(const std::string& tensor, float amax,
                                      const std::string& source) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "plan"));
  quant::QuantPlan plan = impl_->plan;
  plan.SetActivationAmax(tensor, amax, source);
  QK_RETURN_IF_ERROR(quant::ValidatePlan(plan));
  return MakePublicPlan(std::move(plan));
}

std::string Plan::ToJson() const { return formats::FormatPlanJson(impl_->plan); }

Result<Plan> Plan::FromJson(const std::string& json, const std::string& source_name) {
  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, formats::ParsePlanJson(json, source_name));
  return MakePublicPlan(std::move(plan));
}

Result<Plan> Plan::Read(const std::string& path) {
  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, analysis::ReadPlanFile(path));
  return MakePublicPlan(std::move(plan));
}

Status Plan::Write(const std::string& path) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "plan"));
  QK_ASSIGN_OR_RETURN(formats::ArtifactKind kind, formats::ArtifactKindFromPath(path));
  QK_RETURN_IF_NOT(kind != formats::ArtifactKind::kOnnx, StatusCode::kInvalidArgument,
                   "{}: a Q/DQ model needs the float model: use WriteArtifacts", path);
  return formats::WritePlanFile(path, kind, impl_->plan, formats::TrtCacheWriteOptions{});
}

Status Plan::Write(const std::string& path, PlanFormat format, const CacheOptions& cache) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "plan"));
  switch (format) {
    case PlanFormat::kJson:
      return formats::WritePlanFile(path, formats::ArtifactKind::kPlanJson, impl_->plan, {});
    case PlanFormat::kRangesText:
      return formats::WritePlanFile(path, formats::ArtifactKind::kRangesText, impl_->plan, {});
    case PlanFormat::kTrtCache:
      break;
  }
  // The header names are checked only where they are written.
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions header, pipelines::ToTrtCacheOptions(cache));
  return formats::WritePlanFile(path, formats::ArtifactKind::kTrtCache, impl_->plan, header);
}

Result<std::string> Plan::CacheText(const CacheOptions& cache) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "plan"));
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions header, pipelines::ToTrtCacheOptions(cache));
  return formats::FormatTrtCache(impl_->plan, header);
}

Result<BuiltPlan> BuildPlan(const Statistics& statistics, const Sites& sites, const MethodChoices& methods) {
  QK_RETURN_IF_ERROR(RequireValid(statistics.valid() && sites.model.valid(), "statistics or sites"));
  const pipelines::LoadedModel& loaded = sites.model.impl().loaded;
  QK_ASSIGN_OR_RETURN(pipelines::CalibrationSites internal,
                      pipelines::FindCalibrationSites(loaded, ToPlacementOptions(sites.placement)));
  QK_ASSIGN_OR_RETURN(pipelines::MethodChoice choice, pipelines::ToMethodChoice(methods));
  const pipelines::Statistics& s = statistics.impl().statistics;
  QK_RETURN_IF_NOT(s.stats.model_sha256.empty() || s.stats.model_sha256 == loaded.sha256,
                   StatusCode::kInvalidArgument, "the statistics were collected on another model than {}",
                   loaded.path);
  QK_ASSIGN_OR_RETURN(pipelines::BuiltPlan built, pipelines::BuildPlan(s, loaded, internal, choice));
  return BuiltPlan{MakePublicPlan(std::move(built.plan)), std::move(built.warnings)};
}

Result<Artifacts> WriteArtifacts(const Model& model, const Plan& plan, const std::string& dir,
                                 const ArtifactOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid() && plan.valid(), "model or plan"));
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions cache,
                      pipelines::ToTrtCacheOptions(options.cache));
  QK_ASSIGN_OR_RETURN(pipelines::ArtifactReport report,
                      pipelines::WriteArtifacts(model.impl().loaded, plan.impl().plan,
                                                ToPlacementOptions(options.placement), dir, cache));
  return ArtifactsFrom(report.written, report.inserted);
}

Result<Artifacts> WriteQdqModel(const Model& model, const Plan& plan, const std::string& path,
                                const Placement& placement) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid() && plan.valid(), "model or plan"));
  // The loaded model is shared and immutable: the Q/DQ model is a fresh copy of the file, and
  // the plan a copy that gains the weight scales it lacked.
  QK_ASSIGN_OR_RETURN(ir::Model qdq_model, analysis::LoadModelForQuantization(model.path()));
  quant::QuantPlan applied = plan.impl().plan;
  passes::ApplyPlanOptions apply;
  apply.placement = ToPlacementOptions(placement);
  QK_ASSIGN_OR_RETURN(passes::PassReport inserted,
                      passes::RunPass(qdq_model, passes::ApplyPlan(&applied, apply)));
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(qdq_model, path));
  return ArtifactsFrom({path}, inserted);
}

}  // namespace quantkit
