#include "passes/insert_qdq.h"

#include <map>
#include <tuple>
#include <unordered_map>

#include "common/check.h"
#include "ir/scopes.h"
#include "ir/verifier.h"
#include "quant/weight_scales.h"

namespace quantkit::passes {
namespace {

struct PendingPair {
  const quant::TensorQuant* entry = nullptr;
  std::vector<const QdqSite*> sites;
  ir::Node* first_consumer = nullptr;
};

// Creates scale/zero-point initializers and the Q -> DQ chain for one tensor, inserted just
// before its first consumer (the graph is sorted, so the producer is already earlier).
Result<ir::Value*> BuildPair(ir::Graph& graph, ir::Value* x, const quant::TensorQuant& q,
                             ir::Node* before) {
  const bool per_channel = q.per_channel();
  std::vector<int64_t> dims;
  if (per_channel) dims.push_back(static_cast<int64_t>(q.scale.size()));
  ir::Tensor scale(ir::DType::kFloat, dims);
  ir::Tensor zero_point(ir::DType::kInt8, dims);
  for (size_t i = 0; i < q.scale.size(); ++i) {
    scale.mutable_data_as<float>()[i] = q.scale[i];
    zero_point.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(q.zero_point[i]);
  }
  const std::string base = x->name();
  ir::Value* s = graph.AddInitializer(graph.UniqueValueName(base + "_scale"), std::move(scale));
  ir::Value* z =
      graph.AddInitializer(graph.UniqueValueName(base + "_zero_point"), std::move(zero_point));
  const std::string q_name = graph.UniqueValueName(base + "_quantized");
  QK_ASSIGN_OR_RETURN(ir::Node * qnode,
                      graph.InsertNodeBefore(before, "QuantizeLinear", {x, s, z}, {q_name}, "",
                                             graph.UniqueNodeName(base + "_QuantizeLinear")));
  const std::string dq_name = graph.UniqueValueName(base + "_dequantized");
  QK_ASSIGN_OR_RETURN(ir::Node * dqnode,
                      graph.InsertNodeBefore(before, "DequantizeLinear", {qnode->output(0), s, z},
                                             {dq_name}, "",
                                             graph.UniqueNodeName(base + "_DequantizeLinear")));
  if (per_channel) {
    qnode->SetAttr(ir::Attribute::Int("axis", q.axis));
    dqnode->SetAttr(ir::Attribute::Int("axis", q.axis));
  }
  // Types: int8 between the pair, the float type of x after it.
  qnode->output(0)->type = x->type;
  qnode->output(0)->type.dtype = ir::DType::kInt8;
  dqnode->output(0)->type = x->type;
  return dqnode->output(0);
}

}  // namespace

Status AddWeightScales(const ir::Graph& graph, const std::vector<QdqSite>& sites,
                       quant::QuantPlan* plan) {
  for (const QdqSite& site : sites) {
    if (site.role != quant::TensorRole::kWeight || plan->Find(site.tensor)) continue;
    // The consumer's input, followed out of a body to the weight it captures.
    const ir::Value* w = ir::ResolveCapture(site.consumer->input(static_cast<size_t>(site.input_index)));
    QK_RETURN_IF_NOT(w && w->initializer && w->initializer->dtype() == ir::DType::kFloat,
                     StatusCode::kInternal, "weight site '{}' is not a float initializer",
                     site.tensor);
    const ir::Tensor& t = *w->initializer;
    QK_ASSIGN_OR_RETURN(std::vector<float> amax,
                        quant::PerChannelAbsMax(t.data_as<float>(), t.dims(), site.axis, site.tensor));
    quant::TensorQuant& entry = plan->SetScale(site.tensor, quant::WeightScalesFromAmax(amax),
                                               site.axis, quant::TensorRole::kWeight, "weights:max");
    entry.amax = amax;  // the measured ranges, not scale*127 (they differ for all-zero channels)
  }
  return Status::Ok();
}

Result<InsertQdqReport> InsertQdq(ir::Model& model, const quant::QuantPlan& plan,
                                  const std::vector<QdqSite>& sites) {
  const int64_t opset = model.OpsetFor("");
  QK_RETURN_IF_NOT(opset >= kMinQdqOpset, StatusCode::kUnsupported,
                   "model uses opset {} of the default domain; Q/DQ for TensorRT needs opset >= {} "
                   "(per-channel axis). Convert the model to opset {} first.",
                   opset, kMinQdqOpset, kMinQdqOpset);
  QK_RETURN_IF_ERROR(quant::ValidatePlan(plan));
  // Each graph holding sites (the main graph, If/Loop/Scan bodies) is sorted; its depth orders
  // the insertion, enclosing graphs first, so that a body's new names (UniqueValueName looks
  // outwards) never shadow a name its enclosing graph gains later.
  std::unordered_map<const ir::Graph*, int> depth;
  std::unordered_map<const ir::Node*, size_t> position;
  Status sorted;
  ir::ForEachGraph(*model.graph, [&](ir::Graph& g) {
    depth[&g] = g.parent() ? depth[g.parent()] + 1 : 0;
    if (sorted.ok()) sorted = g.SortTopologically();
    const auto nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) position[nodes[i]] = i;
  });
  QK_RETURN_IF_ERROR(sorted);

  // Group sites by (graph, tensor); decide everything before mutating.
  InsertQdqReport report;
  std::map<std::tuple<int, const ir::Graph*, std::string>, PendingPair> pairs;
  for (const QdqSite& site : sites) {
    const quant::TensorQuant* entry = plan.Find(site.tensor);
    if (!entry) {
      report.skipped.push_back(site.tensor + ": no entry in the plan");
      continue;
    }
    if (!entry->quantized) {
      report.skipped.push_back(site.tensor + ": " + entry->reason);
      continue;
    }
    const ir::Graph* owner = site.consumer->owner();
    QK_RETURN_IF_NOT(depth.count(owner) && site.consumer->input(static_cast<size_t>(site.input_index)),
                     StatusCode::kInternal, "site '{}' does not belong to the model", site.tensor);
    PendingPair& p = pairs[{depth[owner], owner, site.tensor}];
    p.entry = entry;
    p.sites.push_back(&site);
    if (!p.first_consumer || position[site.consumer] < position[p.first_consumer]) {
      p.first_consumer = site.consumer;
    }
  }
  for (auto& [key, p] : pairs) {
    ir::Graph& graph = *p.first_consumer->owner();
    // The value the consumers read in their own graph (a body's capture, not the outer value).
    const QdqSite& any = *p.sites.front();
    ir::Value* x = any.consumer->input(static_cast<size_t>(any.input_index));
    QK_ASSIGN_OR_RETURN(ir::Value * dq, BuildPair(graph, x, *p.entry, p.first_consumer));
    for (const QdqSite* site : p.sites) {
      graph.SetNodeInput(site->consumer, static_cast<size_t>(site->input_index), dq);
    }
    if (p.entry->role == quant::TensorRole::kWeight) {
      ++report.weight_pairs;
    } else {
      ++report.activation_pairs;
    }
  }
  QK_RETURN_IF_ERROR(ir::Verify(model));
  return report;
}

}  // namespace quantkit::passes
