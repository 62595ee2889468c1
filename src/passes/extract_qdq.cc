#include "passes/extract_qdq.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "common/check.h"
#include "ir/float16.h"
#include "passes/qdq_pairs.h"
#include "quant/params.h"
#include "quant/symmetric_conversion.h"

namespace quantkit::passes {
namespace {

const std::set<std::string>& ShapeOps() {
  static const std::set<std::string> ops{"Reshape",   "Flatten",  "Transpose", "Squeeze",
                                         "Unsqueeze", "Identity", "MaxPool"};
  return ops;
}

// Adds the unit's entry to the plan; returns false (with a note) when it has no usable numbers,
// an error when its scale is one no runtime can use (TensorRT: "Scale coefficients must all be
// positive"): a plan without that tensor, or a cache holding only its header, would be silently
// wrong.
Result<bool> AddUnit(const QdqUnit& u, quant::QuantPlan* plan, ExtractReport* report) {
  const std::string name = u.q ? u.x->name() : u.y->name();
  // An FP8 pair (ModelOpt's --quantize_mode fp8): its zero point is float8, which the INT8 reading
  // of the parameters does not take; say what it is rather than "not a constant".
  const ir::Node& unit_node = u.q ? *u.q : *u.dq;
  const ir::Value* zp = unit_node.num_inputs() > 2 ? unit_node.input(2) : nullptr;
  if (zp != nullptr && zp->initializer &&
      (zp->initializer->dtype() == ir::DType::kFloat8E4M3FN ||
       zp->initializer->dtype() == ir::DType::kFloat8E5M2)) {
    report->notes.push_back(
        fmt::format("{}: {} (FP8) quantization; convert extracts INT8 scales only, not extracted",
                    name, ir::DTypeName(zp->initializer->dtype())));
    return false;
  }
  if (!u.constant_params || u.scale.empty()) {
    report->notes.push_back(name + ": scale or zero point is not a constant; not extracted");
    return false;
  }
  const ir::Node& node = u.q ? *u.q : *u.dq;
  for (size_t i = 0; i < u.scale.size(); ++i) {
    const float s = u.scale[i];
    QK_RETURN_IF_NOT(
        s > 0.0f && std::isfinite(s), StatusCode::kInvalidModel,
        "{}: scale '{}'{} of tensor '{}' is {}; a scale must be finite and positive (lint rule QK003)",
        node.Describe(), node.input(1)->name(), u.scale.size() > 1 ? fmt::format("[{}]", i) : "",
        name, s);
  }
  if (u.quant_dtype == ir::DType::kInt32) {
    // onnxruntime stores quantized biases as int32 behind a DQ; TensorRT keeps biases in float
    // and derives their precision itself, so they have no place in the plan (StripQdq
    // dequantizes them).
    report->notes.push_back(
        name + ": int32 (bias) quantization is not part of a TensorRT plan; kept float");
    return false;
  }
  const Result<quant::QuantRange> range = quant::RangeFor(u.quant_dtype);
  if (!range.ok()) {
    report->notes.push_back(fmt::format("{}: {} quantization is not convertible to int8", name,
                                        ir::DTypeName(u.quant_dtype)));
    return false;
  }
  std::vector<float> scale = u.scale;
  std::string reason;
  if (!u.symmetric()) {
    // Cover the same real interval with a symmetric int8 grid (quant/symmetric_conversion.h, the
    // rule convert reports the cost of). A scale the rule rejects stays as it is and is marked
    // not quantized below.
    for (size_t i = 0; i < scale.size(); ++i) {
      const Result<quant::SymmetricConversion> c =
          quant::ToSymmetricInt8(u.scale[i], u.zero_point[i], u.quant_dtype);
      if (c.ok()) scale[i] = c->scale_to;
    }
    reason = fmt::format("converted from {} with zero point {} to symmetric int8",
                         ir::DTypeName(u.quant_dtype), u.zero_point.front());
    ++report->converted_asymmetric;
  }
  const quant::TensorRole role =
      u.weight ? quant::TensorRole::kWeight : quant::TensorRole::kActivation;
  quant::TensorQuant& t =
      plan->SetScale(name, scale, u.axis, role, "qdq:" + (u.q ? u.q->name : u.dq->name));
  t.reason = reason;
  for (float s : scale) {
    if (!(s > 0.0f) || !std::isfinite(s)) {  // the symmetric rule refused this channel's range
      t.quantized = false;
      t.reason = fmt::format("scale {} is not finite and positive", s);
    }
  }
  ++(u.weight ? report->weights : report->activations);
  return true;
}

class Propagator {
 public:
  Propagator(const ir::Graph& graph, quant::QuantPlan* plan, ExtractReport* report,
             std::unordered_map<const ir::Value*, const ir::Value*> alias)
      : graph_(graph), plan_(plan), report_(report), alias_(std::move(alias)) {}

  void Run() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (const ir::Node* node : graph_.nodes()) changed |= Visit(*node);
    }
  }

 private:
  // The float tensor a value stands for once Q/DQ are stripped.
  const ir::Value* Resolve(const ir::Value* v) const {
    auto it = alias_.find(v);
    return it == alias_.end() ? v : it->second;
  }
  const quant::TensorQuant* Entry(const ir::Value* v) const {
    const quant::TensorQuant* t = v ? plan_->Find(Resolve(v)->name()) : nullptr;
    return t && t->quantized && !t->per_channel() && t->role == quant::TensorRole::kActivation
               ? t
               : nullptr;
  }
  bool Copy(const ir::Value* to, const quant::TensorQuant& from, const std::string& op) {
    const ir::Value* target = Resolve(to);
    if (!target || target->is_constant() || plan_->Find(target->name())) return false;
    if (target->type.kind == ir::TypeInfo::Kind::kTensor &&
        target->type.dtype != ir::DType::kFloat && !ir::Is16BitFloat(target->type.dtype) &&
        target->type.dtype != ir::DType::kUndefined) {
      return false;  // shape tensors etc. are never quantized
    }
    quant::TensorQuant& t =
        plan_->SetScale(target->name(), from.scale, -1, quant::TensorRole::kActivation,
                        "propagated:" + op + " from " + from.tensor);
    t.amax = from.amax;
    ++report_->propagated;
    return true;
  }
  bool Visit(const ir::Node& node) {
    if (!node.domain().empty() || node.num_inputs() == 0 || !node.output(0)) return false;
    const std::string& op = node.op_type();
    const ir::Value* in = node.input(0);
    const ir::Value* out = node.output(0);
    bool changed = false;
    if (ShapeOps().count(op) || op == "Relu" || FloatCast(node)) {
      if (const auto* e = Entry(in)) changed |= Copy(out, *e, op);
      if (const auto* e = Entry(out)) changed |= Copy(in, *e, op);
    } else if (op == "Clip") {
      if (const auto* e = Entry(in)) changed |= Copy(out, *e, op);
      if (const auto* e = Entry(out)) {
        if (ClipWithin(node, e->amax.front())) changed |= Copy(in, *e, op);
      }
    } else if (op == "Concat") {
      const quant::TensorQuant* first = Entry(in);
      bool equal = first != nullptr;
      for (const ir::Value* v : node.inputs()) {
        const auto* e = Entry(v);
        equal = equal && e && e->scale == first->scale;
      }
      if (equal) changed |= Copy(out, *first, op);
      if (const auto* e = Entry(out)) {
        for (const ir::Value* v : node.inputs()) changed |= Copy(v, *e, op);
      }
    }
    return changed;
  }
  // A Cast between float types (an FP16 model's Cast after a float32 graph input): the same
  // tensor in another precision, so ModelOpt's scale of `input_cast_to_fp16` is the FP32 model's
  // scale of `input`.
  static bool FloatCast(const ir::Node& node) {
    if (node.op_type() != "Cast") return false;
    const auto to = static_cast<ir::DType>(node.GetInt("to", 0));
    const ir::DType from =
        node.input(0)->type.is_tensor() ? node.input(0)->type.dtype : ir::DType::kUndefined;
    auto is_float = [](ir::DType t) { return t == ir::DType::kFloat || ir::Is16BitFloat(t); };
    return is_float(to) && (is_float(from) || from == ir::DType::kUndefined);
  }
  // Clip bounds (opset >= 11: inputs 1 and 2; older: attributes) inside [-amax, amax].
  static bool ClipWithin(const ir::Node& node, float amax) {
    auto bound = [&](size_t index, const char* attr, float fallback) {
      const ir::Value* v = node.input(index);
      std::vector<float> value;
      if (v && v->initializer && v->initializer->numel() == 1 &&
          ir::ReadFloatValues(*v->initializer, &value)) {
        return value.front();
      }
      return node.GetFloat(attr, fallback);
    };
    const float lo = bound(1, "min", -INFINITY);
    const float hi = bound(2, "max", INFINITY);
    return lo >= -amax && hi <= amax;
  }

  const ir::Graph& graph_;
  quant::QuantPlan* plan_;
  ExtractReport* report_;
  std::unordered_map<const ir::Value*, const ir::Value*> alias_;
};

}  // namespace

Result<quant::QuantPlan> ExtractQdqPlan(const ir::Graph& graph, const ExtractOptions& options,
                                        ExtractReport* report) {
  ExtractReport local;
  if (!report) report = &local;
  quant::QuantPlan plan;
  plan.provenance.method = "qdq";
  std::unordered_map<const ir::Value*, const ir::Value*> alias;
  for (const QdqUnit& u : FindQdqUnits(graph)) {
    QK_ASSIGN_OR_RETURN(const bool added, AddUnit(u, &plan, report));
    if (!added) continue;
    if (u.q && u.dq_params_match) alias[u.y] = u.x;
  }
  if (options.propagate) Propagator(graph, &plan, report, std::move(alias)).Run();
  return plan;
}

}  // namespace quantkit::passes
