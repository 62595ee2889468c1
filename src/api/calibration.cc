// include/quantkit/calibration.h over the internal steps (pipelines/calibration_steps.h). The
// handles hold the internal types (api/internal.h); this file and that header are
// the only places that convert between them and the public, std-only structs (the data path,
// OpenDataSpec and the statistics collectors: collector.cc).
#include "quantkit/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "api/internal.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "data/image_options.h"
#include "data/image_options_text.h"
#include "formats/plan_files.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/quantized_artifacts.h"
#include "quant/method_amax.h"

namespace quantkit {

namespace {

using api::MakePublicPlan;
using api::MakePublicStatistics;
using api::RequireValid;
using api::ToPlacementOptions;

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

}  // namespace

namespace api {

Status RequireValid(bool valid, const char* what) {
  QK_RETURN_IF_NOT(valid, StatusCode::kInvalidArgument, "{} is empty (default-constructed)", what);
  return Status::Ok();
}

quantkit::Plan MakePublicPlan(quant::QuantPlan plan) {
  auto impl = std::make_shared<quantkit::Plan::Impl>();
  impl->plan = std::move(plan);
  return quantkit::Plan(std::move(impl));
}

quantkit::Statistics MakePublicStatistics(pipelines::Statistics statistics) {
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

Result<pipelines::MethodChoice> ToMethodChoice(const MethodChoices& choices) {
  pipelines::MethodChoice out;
  QK_ASSIGN_OR_RETURN(out.method, quant::ParseMethod(choices.method));
  for (const auto& [key, method] : choices.overrides) {
    QK_ASSIGN_OR_RETURN(out.overrides[key], quant::ParseMethod(method));
  }
  return out;
}

Result<std::optional<passes::FloatOptions>> ToFloatOverride(const FloatPart& f) {
  QK_RETURN_IF_NOT(f.int8, StatusCode::kInvalidArgument,
                   "this writer writes INT8 models: floats.int8 must be true");
  if (f.dtype.empty() && !f.cast_io && f.keep_fp32.empty())
    return std::optional<passes::FloatOptions>();
  passes::FloatOptions out;
  if (!f.dtype.empty()) {
    QK_ASSIGN_OR_RETURN(out.dtype, quant::ParseFloatDType(f.dtype));
  }
  out.cast_io = f.cast_io;
  out.keep_fp32 = f.keep_fp32;
  return std::optional<passes::FloatOptions>(std::move(out));
}

Result<distributed::DistributedOptions> ToDistributedOptions(const DistributedChoices& choices) {
  constexpr double kMaxTimeoutSeconds = 86400;
  const double timeout = choices.timeout_seconds;
  QK_RETURN_IF_NOT(timeout >= 1 && timeout <= kMaxTimeoutSeconds, StatusCode::kInvalidArgument,
                   "distributed timeout must be in [1, {}] seconds, got {}", kMaxTimeoutSeconds,
                   timeout);
  distributed::DistributedOptions out;
  out.required = choices.required;
  out.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000.0));
  return out;
}

Result<formats::TrtCacheWriteOptions> ToTrtCacheOptions(const CacheOptions& cache) {
  formats::TrtCacheWriteOptions out;
  QK_ASSIGN_OR_RETURN(out.version, formats::ParseTrtVersion(cache.trt_version));
  QK_ASSIGN_OR_RETURN(out.calibrator, formats::ParseTrtCalibrator(cache.calibrator));
  return out;
}

}  // namespace api

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
    QK_RETURN_IF_NOT(found, StatusCode::kNotFound, "{}: excluded node '{}' is not in the model",
                     model.path(), node);
  }
  QK_ASSIGN_OR_RETURN(
      pipelines::CalibrationSites found,
      pipelines::FindCalibrationSites(model.impl().loaded, ToPlacementOptions(placement)));
  Sites sites;
  sites.model = model;
  sites.placement = placement;
  sites.activations = found.activations;
  for (const passes::QdqSite& s : found.sites) {
    sites.sites.push_back(Site{s.tensor, s.consumer->name, s.input_index,
                               s.role == quant::TensorRole::kWeight, s.axis});
  }
  return sites;
}

// ---- Statistics --------------------------------------------------------------------------------

std::vector<std::string> Statistics::tensors() const {
  std::vector<std::string> names;
  for (const auto& [name, c] : impl_->statistics.stats.tensors) names.push_back(name);
  return names;
}
int64_t Statistics::samples() const { return impl_->statistics.samples; }
const std::string& Statistics::model_sha256() const { return impl_->statistics.stats.model_sha256; }
const std::string& Statistics::data_description() const {
  return impl_->statistics.data_description;
}
const std::string& Statistics::data_fingerprint() const {
  return impl_->statistics.data_fingerprint;
}

Result<float> Statistics::AbsMax(const std::string& tensor) const { return Amax(tensor, "max"); }

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

std::string Statistics::Serialize() const {
  return formats::SerializeStats(impl_->statistics.stats);
}

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
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions header, api::ToTrtCacheOptions(cache));
  return formats::WritePlanFile(path, formats::ArtifactKind::kTrtCache, impl_->plan, header);
}

Result<std::string> Plan::CacheText(const CacheOptions& cache) const {
  QK_RETURN_IF_ERROR(RequireValid(valid(), "plan"));
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions header, api::ToTrtCacheOptions(cache));
  return formats::FormatTrtCache(impl_->plan, header);
}

Result<BuiltPlan> BuildPlan(const Statistics& statistics, const Sites& sites,
                            const MethodChoices& methods) {
  QK_RETURN_IF_ERROR(
      RequireValid(statistics.valid() && sites.model.valid(), "statistics or sites"));
  const pipelines::LoadedModel& loaded = sites.model.impl().loaded;
  QK_ASSIGN_OR_RETURN(pipelines::CalibrationSites internal,
                      pipelines::FindCalibrationSites(loaded, ToPlacementOptions(sites.placement)));
  QK_ASSIGN_OR_RETURN(pipelines::MethodChoice choice, api::ToMethodChoice(methods));
  const pipelines::Statistics& s = statistics.impl().statistics;
  QK_RETURN_IF_NOT(s.stats.model_sha256.empty() || s.stats.model_sha256 == loaded.sha256,
                   StatusCode::kInvalidArgument,
                   "the statistics were collected on another model than {}", loaded.path);
  QK_ASSIGN_OR_RETURN(pipelines::BuiltPlan built,
                      pipelines::BuildPlan(s, loaded, internal, choice));
  return BuiltPlan{MakePublicPlan(std::move(built.plan)), std::move(built.warnings)};
}

Result<Artifacts> WriteArtifacts(const Model& model, const Plan& plan, const std::string& dir,
                                 const ArtifactOptions& options) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid() && plan.valid(), "model or plan"));
  QK_ASSIGN_OR_RETURN(formats::TrtCacheWriteOptions cache, api::ToTrtCacheOptions(options.cache));
  QK_ASSIGN_OR_RETURN(pipelines::ArtifactReport report,
                      pipelines::WriteArtifacts(model.impl().loaded, plan.impl().plan,
                                                ToPlacementOptions(options.placement), dir, cache));
  return ArtifactsFrom(report.written, report.inserted);
}

Result<Artifacts> WriteQdqModel(const Model& model, const Plan& plan, const std::string& path,
                                const Placement& placement) {
  QK_RETURN_IF_ERROR(RequireValid(model.valid() && plan.valid(), "model or plan"));
  // The loaded model is shared and immutable: the Q/DQ model is a fresh copy of the file, and
  // the plan a copy that gains the weight scales it lacked. The file alone, written as every
  // writer writes it (pipelines/quantized_artifacts.h): complete or not at all.
  QK_ASSIGN_OR_RETURN(ir::Model float_model, analysis::LoadModelForQuantization(model.path()));
  quant::QuantPlan applied = plan.impl().plan;
  passes::ApplyPlanOptions apply;
  apply.placement = ToPlacementOptions(placement);
  apply.weight_storage = passes::WeightStorage::kInt8;  // a model file: INT8 weights
  const std::filesystem::path target(path);
  pipelines::QuantizedFiles files;
  files.model_name = target.filename().string();
  files.implicit_int8 = files.plan_json = false;
  QK_ASSIGN_OR_RETURN(
      std::unique_ptr<ArtifactSet> out,
      ArtifactSet::Open(target.parent_path().empty() ? "." : target.parent_path().string(),
                        {files.model_name}));
  QK_ASSIGN_OR_RETURN(
      passes::PassReport inserted,
      pipelines::StageQuantizedModel(std::move(float_model), apply, &applied, files, out.get()));
  QK_RETURN_IF_ERROR(out->Commit().status());
  return ArtifactsFrom({path}, inserted);
}

}  // namespace quantkit
