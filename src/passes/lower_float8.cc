#include "passes/lower_float8.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "ir/float16.h"
#include "ir/float8.h"
#include "passes/fuse_activation_qdq.h"

namespace quantkit::passes {
namespace {

bool IsFloat8(ir::DType t) {
  return t == ir::DType::kFloat8E4M3FN || t == ir::DType::kFloat8E4M3FNUZ ||
         t == ir::DType::kFloat8E5M2 || t == ir::DType::kFloat8E5M2FNUZ;
}

ir::DType TypeOf(const ir::Value* v) {
  if (v == nullptr) return ir::DType::kUndefined;
  return v->initializer ? v->initializer->dtype() : v->type.dtype;
}

bool IsOp(const ir::Node* n, const char* op) {
  return n != nullptr && n->domain().empty() && n->op_type() == op;
}

Status Unsupported(const ir::Node* n, const std::string& why) {
  return MakeStatus(StatusCode::kUnsupported,
                    "{}: {} (quantkit runs FP8 as E4M3FN QuantizeLinear -> DequantizeLinear pairs "
                    "and E4M3FN weights under DequantizeLinear)",
                    n->Describe(), why);
}

// The zero point of a Q or DQ reading FP8: absent, or E4M3FN zeros (+0 or -0) only.
Status CheckZeroPoint(const ir::Node* n) {
  const ir::Value* zp = n->num_inputs() > 2 ? n->input(2) : nullptr;
  if (zp == nullptr) return Status::Ok();
  if (TypeOf(zp) != ir::DType::kFloat8E4M3FN) {
    return Unsupported(n, fmt::format("zero point '{}' is {}, not float8e4m3fn", zp->name(),
                                      ir::DTypeName(TypeOf(zp))));
  }
  if (!zp->is_constant())
    return Unsupported(n, fmt::format("zero point '{}' is not a constant", zp->name()));
  const ir::Tensor& t = *zp->initializer;
  const auto* bytes = static_cast<const uint8_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if ((bytes[i] & 0x7F) != 0) {
      return Unsupported(n, fmt::format("zero point '{}' is not 0", zp->name()));
    }
  }
  return Status::Ok();
}

Status CheckScale(const ir::Node* n) {
  if (n->has_attr("block_size") && n->GetInt("block_size", 0) != 0) {
    return Unsupported(n, "a blocked scale");
  }
  const ir::Value* s = n->num_inputs() > 1 ? n->input(1) : nullptr;
  if (s == nullptr || !s->is_constant()) return Unsupported(n, "its scale is not a constant");
  const ir::DType t = s->initializer->dtype();
  if (t != ir::DType::kFloat && !ir::Is16BitFloat(t)) {
    return Unsupported(n, fmt::format("scale of type {}", ir::DTypeName(t)));
  }
  if (s->initializer->dims().size() > 1) return Unsupported(n, "a scale of rank 2 or more");
  return Status::Ok();
}

// decode(W) * s along `axis` (per tensor when s holds one value), in the scale's dtype.
Result<ir::Tensor> Dequantize(const ir::Node* dq) {
  const ir::Tensor& w = *dq->input(0)->initializer;
  const ir::Tensor& s = *dq->input(1)->initializer;
  std::vector<float> scale;
  QK_RETURN_IF_NOT(ir::ReadFloatValues(s, &scale), StatusCode::kInvalidModel,
                   "{}: cannot read its scale", dq->Describe());
  const std::vector<int64_t>& dims = w.dims();
  int64_t inner = 1, channels = 1;
  if (scale.size() != 1) {
    const int64_t rank = static_cast<int64_t>(dims.size());
    int64_t axis = dq->GetInt("axis", 1);
    if (axis < 0) axis += rank;
    QK_RETURN_IF_NOT(axis >= 0 && axis < rank && dims[axis] == static_cast<int64_t>(scale.size()),
                     StatusCode::kInvalidModel, "{}: {} scales for axis {} of a weight of rank {}",
                     dq->Describe(), scale.size(), dq->GetInt("axis", 1), rank);
    channels = dims[axis];
    for (int64_t k = axis + 1; k < rank; ++k) inner *= dims[k];
  }
  QK_RETURN_IF_NOT(w.nbytes() >= static_cast<size_t>(w.numel()), StatusCode::kInvalidModel,
                   "{}: weight '{}' holds {} bytes for {} values", dq->Describe(),
                   dq->input(0)->name(), w.nbytes(), w.numel());
  const auto* codes = static_cast<const uint8_t*>(w.data());
  std::vector<float> values(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float f = scale.size() == 1 ? scale[0] : scale[(i / inner) % channels];
    values[i] = ir::Float8E4M3FNToFloat(codes[i]) * f;
  }
  ir::Tensor out = ir::Tensor::FromVector(ir::DType::kFloat, dims, values);
  if (s.dtype() == ir::DType::kFloat) return out;
  return ir::ConvertFloatTensor(out, s.dtype());
}

// The FP8 type a DequantizeLinear reads, or kUndefined: its input's type where known (an
// intermediate value's often is not), else its zero point's, else its QuantizeLinear's (zero
// point or output_dtype).
ir::DType Float8TypeRead(const ir::Node* dq) {
  auto zero_point_type = [](const ir::Node* n) {
    return n->num_inputs() > 2 ? TypeOf(n->input(2)) : ir::DType::kUndefined;
  };
  for (ir::DType t : {TypeOf(dq->input(0)), zero_point_type(dq)}) {
    if (IsFloat8(t)) return t;
  }
  const ir::Node* q = dq->input(0)->producer();
  if (IsOp(q, "QuantizeLinear")) {
    if (IsFloat8(zero_point_type(q))) return zero_point_type(q);
    const auto declared = static_cast<ir::DType>(q->GetInt("output_dtype", 0));
    if (IsFloat8(declared)) return declared;
  }
  return ir::DType::kUndefined;
}

Status CheckNoFloat8Left(const ir::Graph& graph) {
  for (const ir::Value* v : graph.inputs()) {
    if (IsFloat8(TypeOf(v))) {
      return MakeStatus(StatusCode::kUnsupported,
                        "graph input '{}' is {}: quantkit runs FP8 only "
                        "inside QuantizeLinear -> DequantizeLinear pairs and as stored weights",
                        v->name(), ir::DTypeName(TypeOf(v)));
    }
  }
  for (const ir::Node* n : graph.nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (v != nullptr && IsFloat8(TypeOf(v))) {
        return Unsupported(
            n, fmt::format("it writes '{}' as {}", v->name(), ir::DTypeName(TypeOf(v))));
      }
    }
    for (const ir::Value* v : n->inputs()) {
      if (v != nullptr && IsFloat8(TypeOf(v))) {
        return Unsupported(n,
                           fmt::format("it reads '{}' ({})", v->name(), ir::DTypeName(TypeOf(v))));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

bool HasFloat8(const ir::Model& model) {
  for (const ir::Value* v : model.graph->values()) {
    if (IsFloat8(TypeOf(v))) return true;
  }
  return false;
}

Result<Float8Lowering> LowerFloat8ForSimulation(ir::Model& model) {
  ir::Graph& graph = *model.graph;
  Float8Lowering done;
  std::set<ir::Node*> quantizers;  // each removed once, after all of its DequantizeLinear
  for (ir::Node* dq : graph.nodes()) {
    if (!IsOp(dq, "DequantizeLinear") || dq->input(0) == nullptr) continue;
    ir::Value* in = dq->input(0);
    const ir::DType type = Float8TypeRead(dq);
    if (type == ir::DType::kUndefined) continue;
    if (type != ir::DType::kFloat8E4M3FN) {
      return Unsupported(dq, fmt::format("'{}' is {}", in->name(), ir::DTypeName(type)));
    }
    QK_RETURN_IF_ERROR(CheckScale(dq));
    QK_RETURN_IF_ERROR(CheckZeroPoint(dq));
    if (in->is_constant()) {
      QK_ASSIGN_OR_RETURN(ir::Tensor folded, Dequantize(dq));
      ir::Value* value = graph.AddInitializer(graph.UniqueValueName(in->name() + "_dequantized"),
                                              std::move(folded));
      graph.ReplaceAllUsesWith(dq->output(0), value);
      QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
      ++done.weights;
      continue;
    }
    ir::Node* q = in->producer();
    if (!IsOp(q, "QuantizeLinear")) {
      return Unsupported(dq, fmt::format("'{}' comes from {}, not a QuantizeLinear", in->name(),
                                         q ? q->Describe() : "a graph input"));
    }
    QK_RETURN_IF_ERROR(CheckScale(q));
    QK_RETURN_IF_ERROR(CheckZeroPoint(q));
    const int64_t axis = q->GetInt("axis", 1);
    if (q->input(1)->initializer->numel() != 1 || dq->input(1)->initializer->numel() != 1) {
      QK_RETURN_IF_NOT(axis == dq->GetInt("axis", 1), StatusCode::kUnsupported,
                       "{} and {}: per-axis scales on different axes", q->Describe(),
                       dq->Describe());
    }
    QK_RETURN_IF_NOT(q->GetInt("saturate", 1) == 1, StatusCode::kUnsupported,
                     "{}: saturate=0 (FP8 without saturation) is not supported", q->Describe());
    ir::Value* out = dq->output(0);
    const std::string out_name = out->name();
    model.SetOpset(kSimulationDomain, 1);
    QK_ASSIGN_OR_RETURN(
        ir::Node * fq,
        graph.InsertNodeBefore(dq, "FakeQuantizeE4M3", {q->input(0), q->input(1), dq->input(1)},
                               {graph.UniqueValueName(out_name + "_fq")}, kSimulationDomain,
                               dq->name + "_fq"));
    fq->SetAttr(ir::Attribute::Int("axis", axis));
    fq->output(0)->type = out->type;
    graph.ReplaceAllUsesWith(out, fq->output(0));
    QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
    QK_RETURN_IF_ERROR(graph.RenameValue(fq->output(0), out_name));
    quantizers.insert(q);
    ++done.pairs;
  }
  for (ir::Node* q : quantizers) {
    ir::Value* quantized = q->output(0);
    if (!quantized->uses().empty() || quantized->is_graph_output()) {
      return Unsupported(
          q, fmt::format("'{}' is read by more than DequantizeLinear", quantized->name()));
    }
    QK_RETURN_IF_ERROR(graph.RemoveNode(q));
  }
  // The zero points the removed nodes read.
  for (ir::Value* v : graph.values()) {
    if (v->is_constant() && IsFloat8(TypeOf(v)) && v->uses().empty() && !v->is_graph_output()) {
      QK_RETURN_IF_ERROR(graph.RemoveValue(v));
    }
  }
  QK_RETURN_IF_ERROR(CheckNoFloat8Left(graph));
  return done;
}

}  // namespace quantkit::passes
