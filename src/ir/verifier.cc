#include "ir/verifier.h"

#include <algorithm>
#include <unordered_set>

#include "common/check.h"

namespace quantkit::ir {
namespace {

bool DefinedInScope(const Graph* g, const std::string& name) {
  for (; g; g = g->parent()) {
    const Value* v = g->FindValue(name);
    if (v && (v->producer() || v->is_graph_input() || v->is_initializer())) return true;
  }
  return false;
}

bool IsDefined(const Value* v) {
  return v->producer() || v->is_graph_input() || v->is_initializer() || v->is_outer_scope();
}

bool IsFloatScaleType(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16;
}

// The quantized types of ONNX QuantizeLinear outputs (T2/T3, opsets 10-21).
bool IsQuantizedType(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
    case DType::kInt16:
    case DType::kUint16:
    case DType::kInt4:
    case DType::kUint4:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

// Known dtype of a value, kUndefined when the model does not say.
DType KnownType(const Value* v) {
  return v && v->type.is_tensor() ? v->type.dtype : DType::kUndefined;
}

// I6, the ONNX type constraints of QuantizeLinear(x: float|int32, scale: float, zero_point:
// quantized) and DequantizeLinear(x: quantized|int32, scale: float, zero_point: x's type). A
// model that breaks them cannot run anywhere; without this check a Q of an int8 tensor was
// linted "0 errors" and converted into a scale for it.
Status VerifyQdqTypes(const Node& node, bool is_q) {
  const Value* x = node.input(0);
  const Value* scale = node.input(1);
  QK_RETURN_IF_NOT(x && scale, StatusCode::kInvalidModel,
                   "I6: {}: needs the input x and a scale ({} of 2-3 inputs given)",
                   node.Describe(),
                   static_cast<int>(x != nullptr) + static_cast<int>(scale != nullptr));
  const DType xt = KnownType(x), st = KnownType(scale), zt = KnownType(node.input(2));
  QK_RETURN_IF_NOT(st == DType::kUndefined || IsFloatScaleType(st), StatusCode::kInvalidModel,
                   "I6: {}: scale '{}' is {}; ONNX requires float, float16 or bfloat16",
                   node.Describe(), scale->name(), DTypeName(st));
  if (scale->initializer) {
    QK_RETURN_IF_NOT(scale->initializer->numel() > 0, StatusCode::kInvalidModel,
                     "I6: {}: scale '{}' is empty", node.Describe(), scale->name());
  }
  if (is_q) {
    QK_RETURN_IF_NOT(
        xt == DType::kUndefined || IsFloatScaleType(xt) || xt == DType::kInt32,
        StatusCode::kInvalidModel,
        "I6: {}: quantizes '{}' of type {}; ONNX QuantizeLinear takes float, float16, bfloat16 or "
        "int32 (is it already quantized?)",
        node.Describe(), x->name(), DTypeName(xt));
    QK_RETURN_IF_NOT(
        zt == DType::kUndefined || IsQuantizedType(zt), StatusCode::kInvalidModel,
        "I6: {}: zero point '{}' is {}; a QuantizeLinear zero point is int8, uint8, int16, uint16, "
        "int4, uint4 or float8 and gives the output type",
        node.Describe(), node.input(2)->name(), DTypeName(zt));
    return Status::Ok();
  }
  QK_RETURN_IF_NOT(
      xt == DType::kUndefined || IsQuantizedType(xt) || xt == DType::kInt32,
      StatusCode::kInvalidModel,
      "I6: {}: dequantizes '{}' of type {}; ONNX DequantizeLinear takes a quantized (int8, uint8, "
      "int16, uint16, int32, int4, uint4, float8) tensor",
      node.Describe(), x->name(), DTypeName(xt));
  QK_RETURN_IF_NOT(
      zt == DType::kUndefined || xt == DType::kUndefined || zt == xt, StatusCode::kInvalidModel,
      "I6: {}: zero point '{}' is {} but the input '{}' is {}; they must have the same type",
      node.Describe(), node.input(2)->name(), DTypeName(zt), x->name(), DTypeName(xt));
  return Status::Ok();
}

Status VerifyQdq(const Node& node) {
  if (!node.domain().empty() ||
      (node.op_type() != "QuantizeLinear" && node.op_type() != "DequantizeLinear")) {
    return Status::Ok();
  }
  QK_RETURN_IF_ERROR(VerifyQdqTypes(node, node.op_type() == "QuantizeLinear"));
  const Value* scale = node.input(1);
  const Value* zero_point = node.input(2);
  if (!scale || !scale->type.has_shape) return Status::Ok();
  const size_t scale_rank = scale->type.dims.size();
  const bool blocked = node.GetInt("block_size", 0) > 0;
  if (!blocked) {
    QK_RETURN_IF_NOT(scale_rank <= 1, StatusCode::kInvalidModel,
                     "I6: {}: scale '{}' has rank {}, expected 0 or 1", node.Describe(),
                     scale->name(), scale_rank);
  }
  // Element counts, not shapes: exporters (onnxruntime) pair a [1] scale with a scalar zero
  // point, which every runtime accepts.
  auto numel = [](const TypeInfo& t) -> int64_t {
    int64_t n = 1;
    for (const Dim& d : t.dims) {
      if (!d.is_known()) return -1;
      n *= d.value;
    }
    return n;
  };
  if (zero_point && zero_point->type.has_shape && numel(zero_point->type) >= 0 &&
      numel(scale->type) >= 0) {
    QK_RETURN_IF_NOT(numel(zero_point->type) == numel(scale->type), StatusCode::kInvalidModel,
                     "I6: {}: zero-point '{}' shape {} differs from scale shape {}",
                     node.Describe(), zero_point->name(), zero_point->type.ToString(),
                     scale->type.ToString());
  }
  const Value* x = node.input(0);
  if (!blocked && scale_rank == 1 && x && x->type.has_shape && scale->type.dims[0].is_known() &&
      scale->type.dims[0].value > 1) {
    const auto rank = static_cast<int64_t>(x->type.dims.size());
    int64_t axis = node.GetInt("axis", 1);
    if (axis < 0) axis += rank;
    QK_RETURN_IF_NOT(axis >= 0 && axis < rank, StatusCode::kInvalidModel,
                     "I6: {}: axis {} out of range for input '{}' of rank {}", node.Describe(),
                     node.GetInt("axis", 1), x->name(), rank);
    const Dim& d = x->type.dims[static_cast<size_t>(axis)];
    QK_RETURN_IF_NOT(
        !d.is_known() || d.value == scale->type.dims[0].value, StatusCode::kInvalidModel,
        "I6: {}: scale '{}' has {} elements but input '{}' has {} on axis {}", node.Describe(),
        scale->name(), scale->type.dims[0].value, x->name(), d.value, axis);
  }
  return Status::Ok();
}

Status VerifyGraph(const Graph& graph) {
  // I1: names are unique by construction (values_by_name_); check definitions are not doubled.
  for (const Value* v : graph.values()) {
    int definitions = (v->producer() ? 1 : 0) + (v->is_outer_scope() ? 1 : 0);
    // An initializer that is also a graph input is ONNX's "overridable default": one definition.
    if (v->is_graph_input() || v->is_initializer()) ++definitions;
    QK_RETURN_IF_NOT(definitions <= 1, StatusCode::kInvalidModel,
                     "I1: value '{}' in graph '{}' has {} definitions", v->name(), graph.name,
                     definitions);
    if (v->is_outer_scope()) {
      QK_RETURN_IF_NOT(DefinedInScope(graph.parent(), v->name()), StatusCode::kInvalidModel,
                       "I2: value '{}' is captured by graph '{}' but no enclosing graph defines it",
                       v->name(), graph.name);
    }
    // I3 (uses side).
    for (const Use& u : v->uses()) {
      QK_RETURN_IF_NOT(u.node && u.node->owner() == &graph &&
                           static_cast<size_t>(u.input_index) < u.node->num_inputs() &&
                           u.node->input(static_cast<size_t>(u.input_index)) == v,
                       StatusCode::kInternal, "I3: use of value '{}' does not point back at it",
                       v->name());
    }
    if (v->producer()) {
      QK_RETURN_IF_NOT(v->producer()->output(static_cast<size_t>(v->producer_output())) == v,
                       StatusCode::kInternal, "I3: producer of '{}' does not list it", v->name());
    }
  }
  for (const Node* node : graph.nodes()) {
    for (size_t i = 0; i < node->num_inputs(); ++i) {
      const Value* in = node->input(i);
      if (!in) continue;
      QK_RETURN_IF_NOT(IsDefined(in), StatusCode::kInvalidModel,
                       "I2: {} reads '{}', which is not a graph input, an initializer or the "
                       "output of any node",
                       node->Describe(), in->name());
      const auto& uses = in->uses();
      QK_RETURN_IF_NOT(std::find(uses.begin(), uses.end(),
                                 Use{const_cast<Node*>(node), static_cast<int>(i)}) != uses.end(),
                       StatusCode::kInternal, "I3: {} input {} missing from uses of '{}'",
                       node->Describe(), i, in->name());
    }
    QK_RETURN_IF_ERROR(VerifyQdq(*node));
    for (const Attribute& a : node->attributes()) {
      for (const auto& sub : a.graphs) {
        QK_RETURN_IF_NOT(sub->parent() == &graph, StatusCode::kInternal,
                         "subgraph '{}' of {} has the wrong parent", sub->name, node->Describe());
        QK_RETURN_IF_ERROR(VerifyGraph(*sub));
      }
    }
  }
  for (const Value* out : graph.outputs()) {
    QK_RETURN_IF_NOT(IsDefined(out), StatusCode::kInvalidModel,
                     "I2: graph output '{}' of graph '{}' is never produced", out->name(),
                     graph.name);
  }
  // I4
  auto order = graph.TopologicalOrder();
  if (!order.ok()) return Status(StatusCode::kInvalidModel, "I4: " + order.status().message());
  return Status::Ok();
}

void CollectDomains(const Graph& graph, std::unordered_set<std::string>* domains) {
  for (const Node* node : graph.nodes()) {
    domains->insert(node->domain());
    for (const Attribute& a : node->attributes()) {
      for (const auto& sub : a.graphs) CollectDomains(*sub, domains);
    }
  }
}

}  // namespace

Status Verify(const Graph& graph) {
  try {
    return VerifyGraph(graph);
  } catch (const InternalError& e) {
    return Status(StatusCode::kInternal, e.what());
  }
}

Status Verify(const Model& model) {
  QK_RETURN_IF_ERROR(Verify(*model.graph));
  std::unordered_set<std::string> domains;
  CollectDomains(*model.graph, &domains);
  for (const std::string& d : domains) {
    QK_RETURN_IF_NOT(model.OpsetFor(d) >= 0, StatusCode::kInvalidModel,
                     "I5: domain '{}' is used by a node but not imported by the model",
                     d.empty() ? "ai.onnx" : d);
  }
  return Status::Ok();
}

}  // namespace quantkit::ir
