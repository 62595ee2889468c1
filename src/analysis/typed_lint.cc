#include "analysis/typed_lint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/clone.h"
#include "ir/float16.h"
#include "ir/shape_inference.h"

namespace quantkit::analysis {
namespace {

bool IsOp(const ir::Node* n, const char* op) {
  return n != nullptr && n->domain().empty() && n->op_type() == op;
}

bool IsFloatType(ir::DType t) {
  return t == ir::DType::kFloat || t == ir::DType::kDouble || ir::Is16BitFloat(t);
}

ir::DType TypeOf(const ir::Value* v) {
  if (v == nullptr) return ir::DType::kUndefined;
  if (v->initializer) return v->initializer->dtype();
  return v->type.is_tensor() ? v->type.dtype : ir::DType::kUndefined;
}

// Ops whose listed inputs all have one type T in every opset (the float inputs are compared).
// -1: every input.
const std::map<std::string, std::vector<int>>& SameTypeInputs() {
  static const auto* ops =
      new std::map<std::string, std::vector<int>>{{"Add", {-1}},
                                                  {"Sub", {-1}},
                                                  {"Mul", {-1}},
                                                  {"Div", {-1}},
                                                  {"Max", {-1}},
                                                  {"Min", {-1}},
                                                  {"Sum", {-1}},
                                                  {"Mean", {-1}},
                                                  {"Concat", {-1}},
                                                  {"Conv", {-1}},
                                                  {"ConvTranspose", {-1}},
                                                  {"Gemm", {-1}},
                                                  {"MatMul", {-1}},
                                                  {"PRelu", {-1}},
                                                  {"Clip", {-1}},
                                                  {"Equal", {-1}},
                                                  {"Less", {-1}},
                                                  {"Greater", {-1}},
                                                  {"LessOrEqual", {-1}},
                                                  {"GreaterOrEqual", {-1}},
                                                  {"Where", {1, 2}},
                                                  {"LayerNormalization", {-1}},
                                                  {"InstanceNormalization", {-1}},
                                                  {"GroupNormalization", {-1}},
                                                  {"Einsum", {-1}},
                                                  {"Range", {-1}},
                                                  {"AveragePool", {-1}},
                                                  {"Softmax", {-1}},
                                                  {"Pad", {0, 2}}};
  return *ops;
}

// The input types ONNX defines for QuantizeLinear (T1) and DequantizeLinear (T) at `opset`.
bool QdqInputAllowed(bool quantize, ir::DType t, int64_t opset) {
  using ir::DType;
  if (quantize) {
    if (t == DType::kFloat || t == DType::kInt32) return true;
    return opset >= 19 && ir::Is16BitFloat(t);
  }
  if (t == DType::kInt8 || t == DType::kUint8 || t == DType::kInt32) return true;
  if (opset >= 19 && ir::IsFloating(t) && ir::BitsPerElement(t) == 8) return true;  // float8 types
  return opset >= 21 &&
         (t == DType::kInt16 || t == DType::kUint16 || t == DType::kInt4 || t == DType::kUint4);
}

class TypedLinter {
 public:
  TypedLinter(const ir::Graph& graph, int64_t opset, std::vector<LintFinding>* out)
      : graph_(graph), opset_(opset), out_(out) {}

  void Run() {
    for (const ir::Node* n : graph_.nodes()) {
      if (!n->domain().empty()) continue;
      InvalidOnnx(*n);
      MixedInputs(*n);
      QdqTypes(*n);
      CastAfterDequantize(*n);
      CastRoundTrip(*n);
    }
    Fp32Islands();
  }

 private:
  void Add(const char* rule, Severity sev, const ir::Node& n, std::string message, std::string why,
           std::string fix) {
    out_->push_back(LintFinding{rule, sev, n.name, n.op_type(), std::move(message), std::move(why),
                                std::move(fix)});
  }

  // What onnx.checker refuses and a TensorRT parse fails on, though quantkit's own runtime may run
  // it.
  void InvalidOnnx(const ir::Node& n) {
    if (IsOp(&n, "Cast")) {
      const int64_t to = n.GetInt("to", -1);
      if (!n.has_attr("to") || to < 0 || to > INT32_MAX ||
          !ir::IsKnownDType(static_cast<int32_t>(to))) {
        Add("QK019", Severity::kError, n,
            n.has_attr("to") ? fmt::format("Cast to {}: not an ONNX data type", to)
                             : std::string("Cast without its required 'to' attribute"),
            "the model is not valid ONNX (onnx.checker rejects it); TensorRT's parser fails on it",
            "give 'to' a TensorProto.DataType (1 float, 10 float16, 16 bfloat16, ...)");
      }
      return;
    }
    const bool quantize = IsOp(&n, "QuantizeLinear");
    if (!quantize && !IsOp(&n, "DequantizeLinear")) return;
    const ir::DType t = TypeOf(n.input(0));
    if (t == ir::DType::kUndefined || QdqInputAllowed(quantize, t, opset_)) return;
    const ir::Node* producer = n.input(0)->producer();
    const bool of_q = IsOp(producer, "QuantizeLinear");
    Add("QK019", Severity::kError, n,
        fmt::format(
            "{} of '{}', a {} tensor{}: not a type it takes at opset {}", n.op_type(),
            n.input(0)->name(), ir::DTypeName(t),
            of_q ? fmt::format(" (the output of QuantizeLinear '{}': a Q of a Q)", producer->name)
                 : std::string(),
            opset_),
        "the model is not valid ONNX (onnx.checker rejects it); TensorRT's parser fails on it",
        quantize
            ? (of_q
                   ? std::string(
                         "dequantize first (Q -> DQ -> Q), or drop the second QuantizeLinear")
                   : std::string(
                         "QuantizeLinear takes float or int32 (float16/bfloat16 from opset 19): Cast "
                         "the input, or raise the opset (quantkit convert)"))
            : std::string(
                  "DequantizeLinear takes int8, uint8 or int32 (float8 from opset 19, int16/int4 "
                  "from 21)"));
  }

  // x (type A) -> Cast(B) -> Cast(A): a round trip through another type, which changes the values
  // (float16's precision and range) for two Cast kernels and nothing else.
  void CastRoundTrip(const ir::Node& n) {
    if (!IsOp(&n, "Cast") || !n.input(0) || !n.output(0)) return;
    const ir::DType from = TypeOf(n.input(0));
    const auto mid = static_cast<ir::DType>(n.GetInt("to", 0));
    if (from == ir::DType::kUndefined || mid == from) return;
    for (const ir::Use& use : n.output(0)->uses()) {
      if (!IsOp(use.node, "Cast") || static_cast<ir::DType>(use.node->GetInt("to", 0)) != from)
        continue;
      Add("QK020", Severity::kWarning, n,
          fmt::format("'{}' ({}) is cast to {} and back to {} by Cast '{}'{}", n.input(0)->name(),
                      ir::DTypeName(from), ir::DTypeName(mid), ir::DTypeName(from), use.node->name,
                      use.node->output(0) && use.node->output(0)->is_graph_output()
                          ? fmt::format(" (graph output '{}')", use.node->output(0)->name())
                          : std::string()),
          fmt::format(
              "the round trip changes the values ({}'s precision and range) and costs two Cast kernels",
              ir::DTypeName(mid)),
          "remove both Casts, or keep the tensor in one type");
      return;
    }
  }

  void MixedInputs(const ir::Node& n) {
    const auto it = SameTypeInputs().find(n.op_type());
    if (it == SameTypeInputs().end()) return;
    const ir::Value* first = nullptr;
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      if (it->second.front() != -1 && std::find(it->second.begin(), it->second.end(),
                                                static_cast<int>(i)) == it->second.end()) {
        continue;
      }
      const ir::Value* v = n.input(i);
      if (!IsFloatType(TypeOf(v))) continue;
      if (first == nullptr) {
        first = v;
      } else if (TypeOf(v) != TypeOf(first)) {
        Add("QK015", Severity::kError, n,
            fmt::format("inputs '{}' ({}) and '{}' ({}) have different float types", first->name(),
                        ir::DTypeName(TypeOf(first)), v->name(), ir::DTypeName(TypeOf(v))),
            "ONNX gives these inputs one type; a strongly typed TensorRT build takes the layer's precision "
            "from them and rejects the mix",
            fmt::format("Cast '{}' to {} (or convert the whole region to one type)", v->name(),
                        ir::DTypeName(TypeOf(first))));
        return;
      }
    }
  }

  void QdqTypes(const ir::Node& n) {
    if (IsOp(&n, "QuantizeLinear")) {
      const ir::DType x = TypeOf(n.input(0)), s = TypeOf(n.input(1));
      if (IsFloatType(x) && IsFloatType(s) && x != s) {
        Add("QK016", Severity::kError, n,
            fmt::format("input '{}' is {} but scale '{}' is {}", n.input(0)->name(),
                        ir::DTypeName(x), n.input(1)->name(), ir::DTypeName(s)),
            "TensorRT's Quantize layer takes its scale in its input's type (opsets below 21 require it too)",
            fmt::format(
                "store the scale as {} (QuantizeLinear opset 19+ takes float16/bfloat16 scales)",
                ir::DTypeName(x)));
      }
      return;
    }
    if (!IsOp(&n, "DequantizeLinear") || !n.input(0)) return;
    const ir::Node* q = n.input(0)->producer();
    if (!IsOp(q, "QuantizeLinear")) return;
    const ir::DType x = TypeOf(q->input(0)), s = TypeOf(n.input(1));
    if (IsFloatType(x) && IsFloatType(s) && x != s) {
      Add("QK016", Severity::kWarning, n,
          fmt::format("dequantizes '{}' ({}) to {} (its scale '{}' is {})", q->input(0)->name(),
                      ir::DTypeName(x), ir::DTypeName(s), n.input(1)->name(), ir::DTypeName(s)),
          "a DequantizeLinear outputs its scale's type: this Q/DQ pair changes the tensor's float type, so the "
          "layers after it run in another precision than the layers before",
          fmt::format(
              "give the DequantizeLinear's scale the type {} (same as the QuantizeLinear's)",
              ir::DTypeName(x)));
    }
  }

  void CastAfterDequantize(const ir::Node& n) {
    if (!IsOp(&n, "Cast") || !n.input(0) || !IsOp(n.input(0)->producer(), "DequantizeLinear"))
      return;
    const ir::Node* dq = n.input(0)->producer();
    // Follow a chain of Casts (DQ -> Cast(fp32) -> Cast(fp16) -> MatMul): the type that reaches the
    // readers is the last Cast's, and every Cast of the chain goes.
    const ir::Node* last = &n;
    int casts = 1;
    while (last->output(0) && last->output(0)->uses().size() == 1 &&
           !last->output(0)->is_graph_output() && IsOp(last->output(0)->uses()[0].node, "Cast")) {
      last = last->output(0)->uses()[0].node;
      ++casts;
    }
    const ir::DType to = static_cast<ir::DType>(last->GetInt("to", 0));
    std::string consumers;
    for (const ir::Use& use : last->output(0)->uses()) {
      if (use.node)
        consumers +=
            (consumers.empty() ? "" : ", ") + use.node->op_type() + " '" + use.node->name + "'";
    }
    Add("QK017", Severity::kWarning, n,
        fmt::format("Cast to {} between DequantizeLinear '{}' and {}", ir::DTypeName(to), dq->name,
                    consumers.empty() ? std::string("its readers") : consumers),
        "TensorRT fuses a DequantizeLinear into the layer that reads it (INT8 inputs); the Cast in between blocks "
        "that fusion and the layer runs in float on dequantized values",
        fmt::format(
            "store DequantizeLinear '{}''s scale as {} so that it outputs {} itself, and remove {}",
            dq->name, ir::DTypeName(to), ir::DTypeName(to),
            casts == 1 ? std::string("the Cast") : fmt::format("the {} Casts", casts)));
  }

  // Connected float32 regions (through float32 values) whose every way in is a Cast from a 16-bit
  // type (or a float32 constant) and every way out a Cast to a 16-bit type.
  void Fp32Islands() {
    auto is_cast_to = [](const ir::Node* n, bool to16) {
      if (!IsOp(n, "Cast")) return false;
      const auto to = static_cast<ir::DType>(n->GetInt("to", 0));
      return to16 ? ir::Is16BitFloat(to) : to == ir::DType::kFloat;
    };
    auto float32_node = [&](const ir::Node* n) {
      if (n == nullptr || !n->domain().empty() || IsOp(n, "Cast")) return false;
      for (const ir::Value* out : n->outputs()) {
        if (TypeOf(out) == ir::DType::kFloat) return true;
      }
      return false;
    };
    std::unordered_set<const ir::Node*> seen;
    for (const ir::Node* start : graph_.nodes()) {
      if (!float32_node(start) || seen.count(start)) continue;
      // Flood the region.
      std::vector<const ir::Node*> region{start}, stack{start};
      seen.insert(start);
      bool island = true;
      bool entered_from_16 = false;
      int casts_out = 0;
      while (!stack.empty()) {
        const ir::Node* n = stack.back();
        stack.pop_back();
        for (const ir::Value* in : n->inputs()) {
          if (TypeOf(in) != ir::DType::kFloat || in->is_constant()) continue;
          const ir::Node* p = in->producer();
          if (p == nullptr) {
            island = false;  // a float32 graph input
          } else if (is_cast_to(p, false)) {
            entered_from_16 |= ir::Is16BitFloat(TypeOf(p->input(0)));
            island &= ir::Is16BitFloat(TypeOf(p->input(0)));
          } else if (float32_node(p) && seen.insert(p).second) {
            region.push_back(p);
            stack.push_back(p);
          } else if (!float32_node(p)) {
            island = false;
          }
        }
        for (const ir::Value* out : n->outputs()) {
          if (TypeOf(out) != ir::DType::kFloat) continue;
          if (out->is_graph_output()) island = false;
          for (const ir::Use& use : out->uses()) {
            if (is_cast_to(use.node, true)) {
              ++casts_out;
            } else if (float32_node(use.node) && seen.insert(use.node).second) {
              region.push_back(use.node);
              stack.push_back(use.node);
            } else if (!float32_node(use.node)) {
              island = false;
            }
          }
        }
      }
      if (!island || !entered_from_16 || casts_out == 0) continue;
      Add("QK018", Severity::kInfo, *start,
          fmt::format("{} node{} run in FP32 between 16-bit regions ({} Cast{} back)",
                      region.size(), region.size() == 1 ? "" : "s", casts_out,
                      casts_out == 1 ? "" : "s"),
          "each way in and out of the island is a Cast kernel, and TensorRT fuses nothing across a Cast",
          "nothing to fix if the island was kept FP32 on purpose (range or accuracy: quantkit's float16 check says "
          "which layers need it); otherwise convert it to the surrounding 16-bit type and drop the Casts");
    }
  }

  const ir::Graph& graph_;
  int64_t opset_;
  std::vector<LintFinding>* out_;
};

}  // namespace

void LintStronglyTyped(const ir::Model& model, std::vector<LintFinding>* findings) {
  Result<ir::Model> typed = ir::CloneModel(model);
  if (!typed.ok()) return;
  // Untyped intermediates are typed where quantkit's inference knows the op; a failure (a cycle)
  // leaves the declared types, which the rules still read.
  (void)ir::InferShapes(*typed);
  TypedLinter(*typed->graph, model.OpsetFor(""), findings).Run();
}

}  // namespace quantkit::analysis
