#include "analysis/simulate.h"

#include <fmt/format.h>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "common/sha256.h"
#include "formats/plan_files.h"
#include "ir/clone.h"
#include "ir/scopes.h"
#include "passes/extract_qdq.h"
#include "passes/float_precision.h"
#include "passes/fold_weight_qdq.h"
#include "passes/fuse_activation_qdq.h"

namespace quantkit::analysis {

namespace {

// The float dtype of a Q/DQ model: that of its QuantizeLinear scales (FP16 in ModelOpt's and
// quantkit's default output, FP32 in onnxruntime's), FP32 when it has none.
quant::FloatDType QdqModelFloatDType(const ir::Graph& graph) {
  for (const ir::Node* n : graph.nodes()) {
    if (!n->domain().empty() || n->op_type() != "QuantizeLinear" || !n->input(1) ||
        !n->input(1)->initializer)
      continue;
    const ir::DType scale = n->input(1)->initializer->dtype();
    if (scale == ir::DType::kFloat16) return quant::FloatDType::kFloat16;
    if (scale == ir::DType::kBFloat16) return quant::FloatDType::kBFloat16;
  }
  return quant::FloatDType::kFloat32;
}

}  // namespace

Result<quant::QuantPlan> ReadPlanFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(formats::ArtifactKind kind, formats::ArtifactKindFromPath(path));
  if (kind != formats::ArtifactKind::kOnnx) {
    QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, formats::ReadPlanFile(path, kind));
    if (kind != formats::ArtifactKind::kPlanJson) {
      // A cache or ranges file records no float precision: the writers' default, with FP32
      // islands where the file's own ranges are beyond it (what `convert` writes from it).
      plan.float_precision.dtype = passes::kDefaultFloatDType;
      passes::MarkPlanRangeFp32Tensors(&plan);
    }
    return plan;
  }
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(path));
  passes::ExtractReport report;
  Result<quant::QuantPlan> extracted = passes::ExtractQdqPlan(*model.graph, {}, &report);
  if (!extracted.ok()) return extracted.status().WithContext(path);
  quant::QuantPlan plan = std::move(*extracted);
  QK_RETURN_IF_NOT(report.activations + report.weights > 0, StatusCode::kInvalidArgument,
                   "{}: no QuantizeLinear/DequantizeLinear to take a plan from", path);
  plan.float_precision.dtype = QdqModelFloatDType(*model.graph);
  return plan;
}

Result<std::vector<std::string>> UnmatchedPlanTensors(const ir::Graph& graph,
                                                      const quant::QuantPlan& plan,
                                                      const std::string& model_name) {
  std::vector<std::string> unmatched;
  int activations = 0, matched = 0;
  for (const auto& [name, t] : plan.tensors) {
    if (!t.quantized) continue;
    const bool found = ir::FindQualifiedValue(graph, name) != nullptr;
    if (!found) unmatched.push_back(name);
    if (t.role == quant::TensorRole::kActivation) {
      ++activations;
      matched += found ? 1 : 0;
    }
  }
  QK_RETURN_IF_NOT(
      activations == 0 || matched > 0, StatusCode::kInvalidArgument,
      "none of the plan's {} quantized activations is a tensor of {} (a plan for another "
      "model?)",
      activations, model_name);
  return unmatched;
}

Status CheckPlanFloatModel(const quant::QuantPlan& plan, const std::string& model_path) {
  if (plan.provenance.float_model_sha256.empty() || !plan.initializers.empty()) return Status::Ok();
  QK_ASSIGN_OR_RETURN(std::string sha, Sha256OfFile(model_path));
  std::string stages;
  for (const std::string& s : plan.provenance.stages)
    stages += (stages.empty() ? "" : ", ") + s.substr(0, s.find('('));
  QK_RETURN_IF_NOT(
      sha == plan.provenance.float_model_sha256, StatusCode::kInvalidArgument,
      "the plan's PTQ stages ({}) changed weights that plan files do not hold: give the float model "
      "written beside the plan (model.float.onnx, sha256 {}), not {}",
      stages, plan.provenance.float_model_sha256.substr(0, 12), model_path);
  return Status::Ok();
}

Result<ir::Model> BuildSimulationModel(const std::string& float_model_path,
                                       const quant::QuantPlan& plan,
                                       const SimulationOptions& options) {
  QK_RETURN_IF_ERROR(CheckPlanFloatModel(plan, float_model_path));
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(float_model_path));
  return BuildSimulationModel(model, plan, options);
}

Result<ir::Model> BuildSimulationModel(const ir::Model& float_model, const quant::QuantPlan& plan,
                                       const SimulationOptions& options) {
  QK_RETURN_IF_ERROR(
      UnmatchedPlanTensors(*float_model.graph, plan, float_model.source_path).status());
  QK_ASSIGN_OR_RETURN(ir::Model model, ir::CloneModel(float_model));
  quant::QuantPlan filled = plan;
  const passes::ApplyPlan apply(&filled, options);
  const passes::FoldWeightQdq fold_weights;
  const passes::FuseActivationQdq fuse_activations;
  QK_RETURN_IF_ERROR(passes::RunPasses(model, {&apply, &fold_weights, &fuse_activations}));
  return model;
}

}  // namespace quantkit::analysis
