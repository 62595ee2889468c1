#include "passes/apply_plan.h"

#include <fmt/ranges.h>

#include "common/check.h"
#include "ir/scopes.h"
#include "passes/float_precision.h"
#include "passes/placement_rules.h"

namespace quantkit::passes {

Result<PlacementPolicy> ParsePlacementPolicy(const std::string& text) {
  if (text == "auto") return PlacementPolicy::kAuto;
  if (text == "tensorrt") return PlacementPolicy::kTensorRT;
  if (text == "plan") return PlacementPolicy::kPlan;
  return MakeStatus(StatusCode::kInvalidArgument, "--placement '{}': use auto, tensorrt or plan",
                    text);
}

bool PlanFromQdqModel(const quant::QuantPlan& plan) {
  for (const auto& [name, t] : plan.tensors) {
    if (t.quantized && t.source.rfind("qdq:", 0) == 0) return true;
  }
  return false;
}

Result<std::vector<QdqSite>> PlanSites(const ir::Graph& graph, const quant::QuantPlan& plan,
                                       const ApplyPlanOptions& options) {
  const bool from_plan = options.mode == PlacementPolicy::kPlan ||
                         (options.mode == PlacementPolicy::kAuto && PlanFromQdqModel(plan));
  if (from_plan) {
    // A plan's float_nodes that name no node are an error here too (as under FindQdqSites).
    PlacementOptions named;
    for (const auto& [node, reason] : plan.float_nodes) named.exclude_nodes.insert(node);
    QK_RETURN_IF_ERROR(CheckExclusions(graph, named));
    // SitesFromPlan knows no exclusions: float-kept nodes lose their Q/DQ here.
    std::vector<QdqSite> kept;
    for (const QdqSite& s : SitesFromPlan(graph, plan)) {
      if (!plan.float_nodes.count(s.consumer->name)) kept.push_back(s);
    }
    return kept;
  }
  PlacementOptions placement = options.placement;
  for (const auto& [node, reason] : plan.float_nodes) placement.exclude_nodes.insert(node);
  return FindQdqSites(graph, placement);
}

namespace {

// SmoothQuant's fold into an affine (passes/smoothquant.h): a one-value operand of Mul / Add
// made one value per channel, of rank at most the other operand's, so every reader's output keeps
// its shape. Any other change of dims is a plan for another model.
bool ScalarMadePerChannel(const ir::Value& v, const ir::Tensor& value) {
  if (v.initializer->numel() != 1) return false;
  for (const ir::Use& u : v.uses()) {
    const std::string& op = u.node->op_type();
    if (!u.node->domain().empty() || (op != "Mul" && op != "Add") || u.node->num_inputs() != 2)
      return false;
    const ir::Value* other = u.node->input(1 - u.input_index);
    const auto dims = other ? other->type.ConcreteDims() : std::nullopt;
    if (!dims || value.dims().size() > dims->size()) return false;
    // Broadcasts against it: aligned from the back, each dim 1 or the other's (unknown: -1).
    const size_t shift = dims->size() - value.dims().size();
    for (size_t k = 0; k < value.dims().size(); ++k) {
      const int64_t d = value.dims()[k], o = (*dims)[shift + k];
      if (d != 1 && o != -1 && d != o) return false;
    }
  }
  return true;
}

}  // namespace

Status ApplyInitializerOverrides(const quant::QuantPlan& plan, ir::Model* model) {
  std::vector<std::pair<ir::Value*, const ir::Tensor*>> writes;
  for (const auto& [name, o] : plan.initializers) {
    // Qualified names reach body initializers; the lookup is const, the model is ours to edit.
    auto* v = const_cast<ir::Value*>(ir::FindQualifiedValue(*model->graph, name));
    QK_RETURN_IF_NOT(
        v && v->initializer && v->initializer->dtype() == ir::DType::kFloat && !v->uses().empty(),
        StatusCode::kInvalidArgument,
        "the plan's {} weights for '{}' name no float initializer the model reads (a plan for "
        "another model, or one rewritten since: apply the stage's weights before folding)",
        o.stage, name);
    QK_RETURN_IF_NOT(
        o.value.dtype() == ir::DType::kFloat &&
            (o.value.dims() == v->initializer->dims() || ScalarMadePerChannel(*v, o.value)),
        StatusCode::kInvalidArgument,
        "the plan's {} weights for '{}' have dims [{}], the model's [{}]", o.stage, name,
        fmt::join(o.value.dims(), ","), fmt::join(v->initializer->dims(), ","));
    writes.emplace_back(v, &o.value);
  }
  for (auto& [v, t] : writes) {
    ir::Tensor value = *t;  // shares the bytes (copy on write)
    value.name = v->initializer->name;
    if (value.dims() != v->initializer->dims()) {
      std::vector<ir::Dim> dims;
      for (int64_t d : value.dims()) dims.push_back(ir::Dim::Known(d));
      v->type = ir::TypeInfo::Tensor(ir::DType::kFloat, std::move(dims));
    }
    v->initializer = std::move(value);
  }
  return Status::Ok();
}

Status ApplyPlan::Run(ir::Model& model, PassReport* report) const {
  QK_ASSIGN_OR_RETURN(std::vector<QdqSite> sites, PlanSites(*model.graph, *plan_, options_));
  // The stages' weights first: weight scales a plan lacks are computed from the values exported.
  QK_RETURN_IF_ERROR(ApplyInitializerOverrides(*plan_, &model));
  QK_RETURN_IF_ERROR(AddWeightScales(*model.graph, sites, plan_));
  QK_RETURN_IF_ERROR(InsertQdq(*plan_, sites, options_.weight_storage).Run(model, report));
  report->changed = report->changed || !plan_->initializers.empty();
  // The float part in the plan's dtype, last: it types what InsertQdq wrote.
  PassReport typed;
  QK_RETURN_IF_ERROR(ConvertFloatPrecision(plan_->float_precision).Run(model, &typed));
  for (const auto& [name, n] : typed.counts) report->Add(name, n);
  for (auto& [name, items] : typed.lists) report->lists[name] = std::move(items);
  report->notes.insert(report->notes.end(), typed.notes.begin(), typed.notes.end());
  if (!typed.summary.empty()) report->summary += "; " + typed.summary;
  report->changed = report->changed || typed.changed;
  return Status::Ok();
}

}  // namespace quantkit::passes
