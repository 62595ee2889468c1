#include "pipelines/quantized_artifacts.h"

#include <utility>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "common/sha256.h"
#include "formats/ranges.h"
#include "onnx/export.h"

namespace quantkit::pipelines {

Status StageFloatModel(const std::string& model_path, quant::QuantPlan* plan, ArtifactSet* set) {
  if (plan->initializers.empty()) return Status::Ok();
  // TensorRT <= 10 builds from a float model: the cache and ranges apply to this one, and QAT
  // starts from it; the plan names it by its hash, so that no other model is simulated with it.
  QK_ASSIGN_OR_RETURN(ir::Model float_model, analysis::LoadModelForQuantization(model_path));
  QK_RETURN_IF_ERROR(passes::ApplyInitializerOverrides(*plan, &float_model));
  const std::string staged = set->Stage("model.float.onnx");
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(float_model, staged));
  QK_ASSIGN_OR_RETURN(plan->provenance.float_model_sha256, Sha256OfFile(staged));
  return Status::Ok();
}

Result<passes::PassReport> StageQuantizedModel(ir::Model float_model,
                                               const passes::ApplyPlanOptions& apply,
                                               quant::QuantPlan* plan, const QuantizedFiles& files,
                                               ArtifactSet* set) {
  QK_ASSIGN_OR_RETURN(passes::PassReport inserted,
                      passes::RunPass(float_model, passes::ApplyPlan(plan, apply)));
  QK_RETURN_IF_ERROR(StageBuiltModel(float_model, *plan, files, set));  // now the Q/DQ model
  return inserted;
}

Result<passes::PassReport> StagePlanArtifacts(const std::string& model_path,
                                              const passes::PlacementOptions& placement,
                                              passes::WeightStorage weight_storage,
                                              quant::QuantPlan* plan, const QuantizedFiles& files,
                                              ArtifactSet* set) {
  QK_RETURN_IF_ERROR(StageFloatModel(model_path, plan, set));
  QK_ASSIGN_OR_RETURN(ir::Model float_model, analysis::LoadModelForQuantization(model_path));
  passes::ApplyPlanOptions apply;
  apply.placement = placement;
  apply.mode = passes::PlacementPolicy::kTensorRT;
  apply.weight_storage = weight_storage;
  return StageQuantizedModel(std::move(float_model), apply, plan, files, set);
}

Status StageBuiltModel(const ir::Model& qdq_model, const quant::QuantPlan& plan,
                       const QuantizedFiles& files, ArtifactSet* set) {
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(qdq_model, set->Stage(files.model_name)));
  return StagePlanFiles(plan, files, set);
}

Status StagePlanFiles(const quant::QuantPlan& plan, const QuantizedFiles& files, ArtifactSet* set) {
  if (files.implicit_int8) {
    QK_RETURN_IF_ERROR(formats::WriteTrtCache(set->Stage(files.cache_name), plan, files.cache));
    QK_RETURN_IF_ERROR(formats::WriteRangesText(set->Stage(files.ranges_name), plan));
  }
  return files.plan_json ? formats::WritePlanJson(set->Stage(files.plan_name), plan) : Status::Ok();
}

}  // namespace quantkit::pipelines
