#include "passes/insert_qdq.h"

#include <map>
#include <tuple>
#include <unordered_map>

#include "common/check.h"
#include "ir/scopes.h"
#include "ir/verifier.h"
#include "quant/params.h"
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
  QK_ASSIGN_OR_RETURN(
      ir::Node * dqnode,
      graph.InsertNodeBefore(before, "DequantizeLinear", {qnode->output(0), s, z}, {dq_name}, "",
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

// The int8 values of weight `w` on the grid of `q` (per channel along q.axis): what a
// QuantizeLinear of the float weight computes (quant::QuantizeValue, round half to even, saturate).
Result<ir::Tensor> QuantizeWeight(const ir::Tensor& w, const quant::TensorQuant& q,
                                  const std::string& name) {
  QK_RETURN_IF_NOT(w.dtype() == ir::DType::kFloat, StatusCode::kInternal,
                   "weight '{}' is not float", name);
  QK_ASSIGN_OR_RETURN(quant::QuantRange range, quant::RangeFor(ir::DType::kInt8));
  const int64_t channels = static_cast<int64_t>(q.scale.size());
  int64_t inner = 1, dim = 1;
  if (q.per_channel()) {
    const int64_t a = q.axis < 0 ? q.axis + w.rank() : q.axis;
    QK_RETURN_IF_NOT(a >= 0 && a < w.rank() && w.dims()[static_cast<size_t>(a)] == channels,
                     StatusCode::kInvalidArgument,
                     "weight '{}': {} scales do not match axis {} of its {} dims", name, channels,
                     q.axis, w.rank());
    dim = channels;
    for (int64_t i = a + 1; i < w.rank(); ++i) inner *= w.dims()[static_cast<size_t>(i)];
  }
  ir::Tensor out(ir::DType::kInt8, w.dims());
  int8_t* dst = out.mutable_data_as<int8_t>();
  const float* src = w.data_as<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const size_t c = static_cast<size_t>(channels > 1 ? (i / inner) % dim : 0);
    dst[i] = static_cast<int8_t>(quant::QuantizeValue(src[i], q.scale[c], 0, range));
  }
  return out;
}

// W_int8 -> DequantizeLinear for weight `w` (a constant of `graph`), inserted before `before`.
Result<ir::Value*> BuildWeightDq(ir::Graph& graph, ir::Value* w, const quant::TensorQuant& q,
                                 ir::Node* before) {
  QK_ASSIGN_OR_RETURN(ir::Tensor values, QuantizeWeight(*w->initializer, q, w->name()));
  std::vector<int64_t> dims;
  if (q.per_channel()) dims.push_back(static_cast<int64_t>(q.scale.size()));
  ir::Tensor scale(ir::DType::kFloat, dims);
  ir::Tensor zero_point(ir::DType::kInt8, dims);
  for (size_t i = 0; i < q.scale.size(); ++i) scale.mutable_data_as<float>()[i] = q.scale[i];
  const std::string base = w->name();
  ir::Value* stored =
      graph.AddInitializer(graph.UniqueValueName(base + "_quantized"), std::move(values));
  ir::Value* s = graph.AddInitializer(graph.UniqueValueName(base + "_scale"), std::move(scale));
  ir::Value* z =
      graph.AddInitializer(graph.UniqueValueName(base + "_zero_point"), std::move(zero_point));
  QK_ASSIGN_OR_RETURN(ir::Node * dqnode,
                      graph.InsertNodeBefore(before, "DequantizeLinear", {stored, s, z},
                                             {graph.UniqueValueName(base + "_dequantized")}, "",
                                             graph.UniqueNodeName(base + "_DequantizeLinear")));
  if (q.per_channel()) dqnode->SetAttr(ir::Attribute::Int("axis", q.axis));
  stored->type = w->type;
  stored->type.dtype = ir::DType::kInt8;
  dqnode->output(0)->type = w->type;
  return dqnode->output(0);
}

// After its sites read `dq` instead: the float weight `w` goes when nothing else reads it, and
// `dq` takes its name.
Status ReplaceWeight(ir::Graph& graph, ir::Value* w, ir::Value* dq) {
  if (!w->uses().empty() || w->is_graph_input() || w->is_graph_output() || !w->is_constant())
    return Status::Ok();
  const std::string name = w->name();
  w->initializer.reset();
  QK_RETURN_IF_ERROR(graph.RemoveValue(w));
  return graph.RenameValue(dq, name);
}

}  // namespace

Result<WeightStorage> ParseWeightStorage(const std::string& text) {
  if (text == "int8") return WeightStorage::kInt8;
  if (text == "float") return WeightStorage::kFakeQuant;
  return MakeStatus(StatusCode::kInvalidArgument, "--weight-storage '{}': use int8 or float", text);
}

Status AddWeightScales(const ir::Graph& graph, const std::vector<QdqSite>& sites,
                       quant::QuantPlan* plan) {
  for (const QdqSite& site : sites) {
    if (site.role != quant::TensorRole::kWeight || plan->Find(site.tensor)) continue;
    // The consumer's input, followed out of a body to the weight it captures.
    const ir::Value* w =
        ir::ResolveCapture(site.consumer->input(static_cast<size_t>(site.input_index)));
    QK_RETURN_IF_NOT(w && w->initializer && w->initializer->dtype() == ir::DType::kFloat,
                     StatusCode::kInternal, "weight site '{}' is not a float initializer",
                     site.tensor);
    const ir::Tensor& t = *w->initializer;
    QK_ASSIGN_OR_RETURN(
        std::vector<float> amax,
        quant::PerChannelAbsMax(t.data_as<float>(), t.dims(), site.axis, site.tensor));
    quant::TensorQuant& entry =
        plan->SetScale(site.tensor, quant::WeightScalesFromAmax(amax), site.axis,
                       quant::TensorRole::kWeight, "weights:max");
    entry.amax = amax;  // the measured ranges, not scale*127 (they differ for all-zero channels)
  }
  return Status::Ok();
}

Status InsertQdq::Run(ir::Model& model, PassReport* report) const {
  const quant::QuantPlan& plan = plan_;
  const std::vector<QdqSite>& sites = sites_;
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
  int64_t activation_pairs = 0, weight_pairs = 0;
  std::vector<std::string> skipped;
  std::map<std::tuple<int, const ir::Graph*, std::string>, PendingPair> pairs;
  for (const QdqSite& site : sites) {
    const quant::TensorQuant* entry = plan.Find(site.tensor);
    if (!entry) {
      skipped.push_back(site.tensor + ": no entry in the plan");
      continue;
    }
    if (!entry->quantized) {
      skipped.push_back(site.tensor + ": " + entry->reason);
      continue;
    }
    const ir::Graph* owner = site.consumer->owner();
    QK_RETURN_IF_NOT(
        depth.count(owner) && site.consumer->input(static_cast<size_t>(site.input_index)),
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
    // INT8 storage needs the weight's bytes in this graph: a body's capture keeps Q -> DQ.
    const bool int8_weight = p.entry->role == quant::TensorRole::kWeight &&
                             weights_ == WeightStorage::kInt8 && x->is_constant() &&
                             x->initializer && x->initializer->dtype() == ir::DType::kFloat;
    ir::Value* dq = nullptr;
    if (int8_weight) {
      QK_ASSIGN_OR_RETURN(dq, BuildWeightDq(graph, x, *p.entry, p.first_consumer));
    } else {
      QK_ASSIGN_OR_RETURN(dq, BuildPair(graph, x, *p.entry, p.first_consumer));
    }
    for (const QdqSite* site : p.sites) {
      graph.SetNodeInput(site->consumer, static_cast<size_t>(site->input_index), dq);
    }
    if (int8_weight) QK_RETURN_IF_ERROR(ReplaceWeight(graph, x, dq));
    if (p.entry->role == quant::TensorRole::kWeight) {
      ++weight_pairs;
    } else {
      ++activation_pairs;
    }
  }
  QK_RETURN_IF_ERROR(ir::Verify(model));
  report->Add(counter::kActivationPairs, activation_pairs);
  report->Add(counter::kWeightPairs, weight_pairs);
  report->summary = fmt::format(
      "inserted {} activation and {} weight symmetric int8 Q/DQ pairs{}; {} sites left in float",
      activation_pairs, weight_pairs,
      weights_ == WeightStorage::kInt8 ? " (weights stored as int8)" : "", skipped.size());
  report->lists[std::string(list::kSkipped)] = std::move(skipped);
  report->changed = activation_pairs + weight_pairs > 0;
  return Status::Ok();
}

}  // namespace quantkit::passes
