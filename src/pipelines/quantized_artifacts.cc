#include "pipelines/quantized_artifacts.h"

#include <set>
#include <utility>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "common/sha256.h"
#include "formats/ranges.h"
#include "ir/clone.h"
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
                                              const ir::Model& loaded,
                                              const passes::PlacementOptions& placement,
                                              passes::WeightStorage weight_storage,
                                              quant::QuantPlan* plan, const QuantizedFiles& files,
                                              ArtifactSet* set) {
  QK_RETURN_IF_ERROR(StageFloatModel(model_path, plan, set));
  QK_ASSIGN_OR_RETURN(ir::Model float_model, ir::CloneModel(loaded));
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

// Weighted ops none of whose activation inputs are quantized, plus the plan's float-kept nodes:
// the layers TensorRT should keep in higher precision. An input counts as quantized when the plan
// quantizes it (a float graph) or when a DequantizeLinear of a non-constant produces it (a Q/DQ
// graph, where the op reads the DQ output, a name the plan does not hold; a DQ of a constant is
// a weight).
std::string LayerPrecisions(const ir::Graph& graph, const quant::QuantPlan& plan,
                            const std::string& precision) {
  auto quantized_activation = [&](const ir::Value* in) {
    if (!in) return false;
    const quant::TensorQuant* t = plan.Find(in->name());
    if (t && t->quantized && t->role == quant::TensorRole::kActivation) return true;
    const ir::Node* p = in->producer();
    if (!p || p->op_type() != "DequantizeLinear" || p->inputs().empty()) return false;
    const ir::Value* x = p->inputs()[0];
    return x != nullptr && !x->is_constant();
  };
  std::set<std::string> layers;
  for (const auto& [node, reason] : plan.float_nodes) layers.insert(node);
  for (const ir::Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm" && op != "MatMul") continue;
    bool quantized = false;
    for (const ir::Value* in : n->inputs()) quantized |= quantized_activation(in);
    if (!quantized && !n->name.empty()) layers.insert(n->name);
  }
  std::string out;
  for (const std::string& l : layers) out += (out.empty() ? "" : ",") + l + ":" + precision;
  return out;
}

}  // namespace quantkit::pipelines
