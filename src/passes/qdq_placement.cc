#include "passes/qdq_placement.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "common/check.h"
#include "common/text.h"
#include "ir/scopes.h"
#include "passes/placement_rules.h"

namespace quantkit::passes {
namespace {

// `v` is the value as its graph defines it (ir::ResolveCapture): a body's capture of a weight is
// the weight.
bool IsFloatConstant(const ir::Value* v) {
  return v && v->is_constant() && v->initializer.has_value() &&
         v->initializer->dtype() == ir::DType::kFloat;
}

// Per-channel axis of a weight input, following the ONNX/TensorRT conventions (R1).
int64_t WeightAxis(const ir::Node& node, const ir::Value& weight) {
  const int64_t rank = weight.initializer->rank();
  const std::string& op = node.op_type();
  if (op == "Conv") return 0;
  if (op == "ConvTranspose") return 1;
  if (op == "Gemm") return node.GetInt("transB", 0) != 0 ? 0 : 1;
  if (op == "MatMul") return rank >= 2 ? rank - 1 : -1;  // output columns of a (.., K, N) weight
  return -1;
}

bool IsConv(const ir::Value* v) {
  return v && v->producer() && v->producer()->domain().empty() &&
         (v->producer()->op_type() == "Conv" || v->producer()->op_type() == "ConvTranspose");
}

}  // namespace

std::unordered_map<const ir::Node*, int> NodeDepths(const std::vector<ir::Node*>& order) {
  std::unordered_map<const ir::Node*, int> depth;
  for (const ir::Node* node : order) {
    int d = 0;
    for (const ir::Value* in : node->inputs()) {
      if (!in || !in->producer()) continue;
      const auto it = depth.find(in->producer());
      if (it != depth.end()) d = std::max(d, it->second);
    }
    depth[node] = d + 1;
  }
  return depth;
}

bool IsResidualBackbone(const ir::Node* conv_a, const ir::Node* conv_b,
                        const std::unordered_map<const ir::Node*, int>& depth,
                        const std::unordered_map<const ir::Node*, size_t>& position) {
  const auto da = depth.find(conv_a), db = depth.find(conv_b);
  if (da != depth.end() && db != depth.end() && da->second != db->second)
    return da->second > db->second;
  const auto pa = position.find(conv_a), pb = position.find(conv_b);
  return pa != position.end() && pb != position.end() && pa->second > pb->second;
}

Status CheckExclusions(const ir::Graph& graph, const PlacementOptions& options) {
  if (options.exclude_nodes.empty() && options.exclude_op_types.empty()) return Status::Ok();
  std::set<std::string> node_names, op_types;
  std::vector<std::string> nodes_in_order,
      op_types_in_order;  // what the "no close match" hint lists
  // Nodes of control-flow bodies count: their weighted ops are quantized too.
  ir::ForEachScopedGraph(graph, [&](const ir::Graph& g, const std::string&) {
    for (const ir::Node* n : g.nodes()) {
      if (!n->name.empty() && node_names.insert(n->name).second) nodes_in_order.push_back(n->name);
      if (op_types.insert(n->op_type()).second) op_types_in_order.push_back(n->op_type());
    }
  });
  // A name given in both sets (the CLI's --exclude) needs to match one of the two.
  auto matches = [&](const std::string& name) {
    return node_names.count(name) || op_types.count(name);
  };
  for (const std::set<std::string>* names : {&options.exclude_nodes, &options.exclude_op_types}) {
    for (const std::string& name : *names) {
      const bool both = options.exclude_nodes.count(name) && options.exclude_op_types.count(name);
      const bool ok = both ? matches(name)
                           : (names == &options.exclude_nodes ? node_names.count(name)
                                                              : op_types.count(name)) != 0;
      if (ok) continue;
      std::vector<std::string> candidates = nodes_in_order;
      candidates.insert(candidates.end(), op_types_in_order.begin(), op_types_in_order.end());
      std::string hint = DidYouMean(name, candidates);
      if (hint.empty()) {
        // Nothing close: say what the model does have, so that the next try can succeed.
        const std::string ops = ListSome(op_types_in_order, /*max_count=*/12);
        hint = nodes_in_order.empty()
                   ? fmt::format("; the model's nodes have no names (exclude by op type: {})", ops)
                   : fmt::format("; the model has {} named nodes ({}) of the op types {}",
                                 nodes_in_order.size(), ListSome(nodes_in_order), ops);
      }
      return MakeStatus(StatusCode::kNotFound,
                        "excluded name '{}' (--exclude, or a plan's float_nodes) matches no node "
                        "name or op type of the model{}",
                        EscapeControl(name), hint);
    }
  }
  return Status::Ok();
}

namespace {

// The sites of one graph (the main graph or a body), appended in topological order. A value a
// body captures is the value its defining graph holds, named in that graph's scope (`scopes`).
Status SitesOfGraph(const ir::Graph& graph,
                    const std::unordered_map<const ir::Graph*, std::string>& scopes,
                    const PlacementOptions& options, std::vector<QdqSite>* sites) {
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, graph.TopologicalOrder());
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  const std::unordered_map<const ir::Node*, int> depth = NodeDepths(order);
  // Plan key of an input: its qualified name where it is defined ("" when a capture is dangling).
  auto key_of = [&](const ir::Value* def) {
    if (def == nullptr) return std::string();
    const auto it = scopes.find(def->owner());
    return it == scopes.end() ? std::string() : ir::QualifiedName(it->second, def->name());
  };

  auto add_activation = [&](ir::Node* node, int index) {
    const ir::Value* def = ir::ResolveCapture(node->input(static_cast<size_t>(index)));
    if (!def || def->is_constant() || key_of(def).empty()) return;
    sites->push_back(QdqSite{node, index, key_of(def), quant::TensorRole::kActivation, -1});
  };

  for (ir::Node* node : order) {
    // R5 first: the cheapest and most explicit decision.
    if (!node->domain().empty() || options.exclude_nodes.count(node->name) ||
        options.exclude_op_types.count(node->op_type())) {
      continue;
    }
    const std::string& op = node->op_type();
    if (options.weighted_op_types.count(op)) {
      // R1: activation inputs and constant weights (inputs 0 and 1); bias (input 2) stays float.
      for (int i = 0; i < 2 && i < static_cast<int>(node->num_inputs()); ++i) {
        const ir::Value* def = ir::ResolveCapture(node->input(static_cast<size_t>(i)));
        if (!def) continue;
        if (IsFloatConstant(def)) {
          const int64_t axis = options.per_channel_weights ? WeightAxis(*node, *def) : -1;
          sites->push_back(QdqSite{node, i, key_of(def), quant::TensorRole::kWeight, axis});
        } else {
          add_activation(node, i);
        }
      }
    } else if (options.pool_op_types.count(op)) {
      add_activation(node, 0);  // R2
    } else if (op == "Add" && options.quantize_residual_add && node->num_inputs() == 2) {
      // R3: quantize the skip branch only.
      ir::Value* a = node->input(0);
      ir::Value* b = node->input(1);
      if (!a || !b || a->is_constant() || b->is_constant()) continue;
      const bool conv_a = IsConv(a);
      const bool conv_b = IsConv(b);
      if (!conv_a && !conv_b) continue;
      int skip = conv_a ? 1 : 0;
      if (conv_a && conv_b) {
        skip = IsResidualBackbone(a->producer(), b->producer(), depth, position) ? 1 : 0;
      }
      add_activation(node, skip);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<QdqSite>> FindQdqSites(const ir::Graph& graph, const PlacementOptions& options) {
  QK_RETURN_IF_ERROR(CheckExclusions(graph, options));
  QK_RETURN_IF_ERROR(ir::CheckScopeNames(graph));
  const std::unordered_map<const ir::Graph*, std::string> scopes = ir::GraphScopes(graph);
  std::vector<QdqSite> sites;
  Status status;
  // The bodies of If/Loop/Scan follow the main graph, parents before the bodies they hold.
  ir::ForEachScopedGraph(graph, [&](const ir::Graph& g, const std::string&) {
    if (status.ok()) status = SitesOfGraph(g, scopes, options, &sites);
  });
  QK_RETURN_IF_ERROR(status);
  return sites;
}

std::vector<QdqSite> SitesFromPlan(const ir::Graph& graph, const quant::QuantPlan& plan) {
  std::vector<QdqSite> sites;
  // The scale read through a float Cast (extract_qdq.h: ModelOpt's `input_cast_to_fp16`) stands
  // for its Q/DQ in a model without that Cast (the FP32 model the FP16 one was made from).
  const std::string cast_alias = "propagated:Cast from ";
  for (const auto& [name, entry] : plan.tensors) {
    if (!entry.quantized) continue;
    const bool alias = entry.source.rfind(cast_alias, 0) == 0 &&
                       graph.FindValue(entry.source.substr(cast_alias.size())) == nullptr;
    if (entry.source.rfind("qdq:", 0) != 0 && !alias) continue;
    const ir::Value* v = graph.FindValue(name);
    if (!v) continue;
    for (const ir::Use& use : v->uses()) {
      sites.push_back(QdqSite{use.node, use.input_index, name, entry.role, entry.axis});
    }
  }
  return sites;
}

std::vector<std::string> ActivationTensors(const std::vector<QdqSite>& sites) {
  std::vector<std::string> names;
  for (const QdqSite& s : sites) {
    if (s.role == quant::TensorRole::kActivation) names.push_back(s.tensor);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace quantkit::passes
