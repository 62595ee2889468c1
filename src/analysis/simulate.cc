#include "analysis/simulate.h"

#include <fmt/format.h>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "formats/plan_files.h"
#include "passes/extract_qdq.h"
#include "passes/placement_rules.h"
#include "quant/params.h"

namespace quantkit::analysis {
namespace {

bool FromQdqModel(const quant::QuantPlan& plan) {
  for (const auto& [name, t] : plan.tensors) {
    if (t.quantized && t.source.rfind("qdq:", 0) == 0) return true;
  }
  return false;
}

const ir::Tensor* ConstantOf(const ir::Value* v) {
  return v && v->is_constant() && v->initializer ? &*v->initializer : nullptr;
}

// Fake-quantized copy of a float weight W with per-tensor or per-axis scale / zero point.
Result<ir::Tensor> FakeQuantize(const ir::Tensor& w, const ir::Tensor& scale, const ir::Tensor* zp,
                                int64_t axis, const std::string& name) {
  QK_RETURN_IF_NOT(w.dtype() == ir::DType::kFloat && scale.dtype() == ir::DType::kFloat,
                   StatusCode::kUnsupported, "weight '{}': only float weights and scales fold", name);
  const ir::DType qtype = zp ? zp->dtype() : ir::DType::kUint8;
  QK_ASSIGN_OR_RETURN(quant::QuantRange range, quant::RangeFor(qtype));
  QK_RETURN_IF_NOT(!zp || zp->numel() == scale.numel(), StatusCode::kInvalidArgument,
                   "weight '{}': {} scales but {} zero points", name, scale.numel(), zp->numel());
  const int64_t channels = scale.numel();
  int64_t inner = 1, dim = 1;
  if (channels > 1) {
    const int64_t a = axis < 0 ? axis + w.rank() : axis;
    QK_RETURN_IF_NOT(a >= 0 && a < w.rank() && w.dims()[a] == channels, StatusCode::kInvalidArgument,
                     "weight '{}': {} scales do not match axis {} of {} dims", name, channels, axis,
                     w.rank());
    dim = w.dims()[a];
    for (int64_t i = a + 1; i < w.rank(); ++i) inner *= w.dims()[i];
  }
  std::vector<float> out(static_cast<size_t>(w.numel()));
  const float* x = w.data_as<float>();
  const float* s = scale.data_as<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = channels > 1 ? (i / inner) % dim : 0;
    int32_t z = 0;
    if (zp) z = qtype == ir::DType::kInt8 ? zp->data_as<int8_t>()[c] : zp->data_as<uint8_t>()[c];
    out[i] = quant::Dequantize(quant::QuantizeValue(x[i], s[c], z, range), s[c], z);
  }
  return ir::Tensor::FromVector<float>(ir::DType::kFloat, w.dims(), out);
}

}  // namespace

Result<PlacementMode> ParsePlacementMode(const std::string& text) {
  if (text == "auto") return PlacementMode::kAuto;
  if (text == "tensorrt") return PlacementMode::kTensorRT;
  if (text == "plan") return PlacementMode::kPlan;
  return MakeStatus(StatusCode::kInvalidArgument, "--placement '{}': use auto, tensorrt or plan", text);
}

Result<std::vector<passes::QdqSite>> SimulationSites(const ir::Graph& graph,
                                                     const quant::QuantPlan& plan,
                                                     const SimulationOptions& options) {
  const bool from_plan = options.mode == PlacementMode::kPlan ||
                         (options.mode == PlacementMode::kAuto && FromQdqModel(plan));
  std::vector<passes::QdqSite> sites;
  if (from_plan) {
    passes::PlacementOptions named;
    for (const auto& [node, reason] : plan.float_nodes) named.exclude_nodes.insert(node);
    QK_RETURN_IF_ERROR(passes::CheckExclusions(graph, named));
    sites = passes::SitesFromPlan(graph, plan);
    // Float-kept nodes lose their Q/DQ here too (SitesFromPlan knows no exclusions).
    std::vector<passes::QdqSite> kept;
    for (const passes::QdqSite& s : sites) {
      if (!plan.float_nodes.count(s.consumer->name)) kept.push_back(s);
    }
    return kept;
  }
  passes::PlacementOptions placement = options.placement;
  for (const auto& [node, reason] : plan.float_nodes) placement.exclude_nodes.insert(node);
  return passes::FindQdqSites(graph, placement);
}

Result<passes::InsertQdqReport> InsertPlanQdq(ir::Model& model, quant::QuantPlan* plan,
                                              const SimulationOptions& options) {
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites, SimulationSites(*model.graph, *plan, options));
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*model.graph, sites, plan));
  return passes::InsertQdq(model, *plan, sites);
}

Result<int> FoldWeightQdq(ir::Model& model) {
  ir::Graph& graph = *model.graph;
  int folded = 0;
  for (ir::Node* dq : graph.nodes()) {
    if (dq->op_type() != "DequantizeLinear" || !dq->domain().empty()) continue;
    ir::Node* q = dq->input(0) ? dq->input(0)->producer() : nullptr;
    if (!q || q->op_type() != "QuantizeLinear" || !q->domain().empty()) continue;
    const ir::Tensor* w = ConstantOf(q->input(0));
    const ir::Tensor* scale = ConstantOf(q->input(1));
    const ir::Tensor* zp = ConstantOf(q->input(2));
    // Only pairs that share scale/zero point/axis are one fake quantization (InsertQdq's are).
    if (!w || !scale || q->input(1) != dq->input(1) || q->input(2) != dq->input(2) ||
        q->GetInt("axis", 1) != dq->GetInt("axis", 1) || q->has_attr("block_size") ||
        dq->output(0)->is_graph_output()) {
      continue;
    }
    const std::string name = q->input(0)->name();
    QK_ASSIGN_OR_RETURN(ir::Tensor fq, FakeQuantize(*w, *scale, zp, q->GetInt("axis", 1), name));
    ir::Value* folded_value = graph.AddInitializer(graph.UniqueValueName(name + "_fakequant"), std::move(fq));
    graph.ReplaceAllUsesWith(dq->output(0), folded_value);
    QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
    if (q->output(0)->uses().empty() && !q->output(0)->is_graph_output()) {
      QK_RETURN_IF_ERROR(graph.RemoveNode(q));
    }
    ++folded;
  }
  return folded;
}

Result<quant::QuantPlan> ReadPlanFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(formats::ArtifactKind kind, formats::ArtifactKindFromPath(path));
  if (kind != formats::ArtifactKind::kOnnx) return formats::ReadPlanFile(path, kind);
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(path));
  passes::ExtractReport report;
  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, passes::ExtractQdqPlan(*model.graph, {}, &report));
  QK_RETURN_IF_NOT(report.activations + report.weights > 0, StatusCode::kInvalidArgument,
                   "{}: no QuantizeLinear/DequantizeLinear to take a plan from", path);
  return plan;
}

Result<std::vector<std::string>> UnmatchedPlanTensors(const ir::Graph& graph, const quant::QuantPlan& plan,
                                                      const std::string& model_name) {
  std::vector<std::string> unmatched;
  int activations = 0, matched = 0;
  for (const auto& [name, t] : plan.tensors) {
    if (!t.quantized) continue;
    const bool found = graph.FindValue(name) != nullptr;
    if (!found) unmatched.push_back(name);
    if (t.role == quant::TensorRole::kActivation) {
      ++activations;
      matched += found ? 1 : 0;
    }
  }
  QK_RETURN_IF_NOT(activations == 0 || matched > 0, StatusCode::kInvalidArgument,
                   "none of the plan's {} quantized activations is a tensor of {} (a plan for another "
                   "model?)",
                   activations, model_name);
  return unmatched;
}

Result<ir::Model> BuildSimulationModel(const std::string& float_model_path, const quant::QuantPlan& plan,
                                       const SimulationOptions& options) {
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(float_model_path));
  QK_RETURN_IF_ERROR(UnmatchedPlanTensors(*model.graph, plan, float_model_path).status());
  quant::QuantPlan filled = plan;
  QK_RETURN_IF_ERROR(InsertPlanQdq(model, &filled, options).status());
  QK_RETURN_IF_ERROR(FoldWeightQdq(model).status());
  return model;
}

}  // namespace quantkit::analysis
