#include "passes/float_precision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "common/text.h"
#include "ir/float16.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "passes/upgrade_opset.h"

namespace quantkit::passes {
namespace {

constexpr ir::DType kF32 = ir::DType::kFloat;

// Ops ONNX (opset 19) defines without a float16 version, or whose output dtype an attribute sets.
const std::set<std::string>& NoLowPrecisionOps() {
  static const std::set<std::string> ops{"Celu",
                                         "IsInf",
                                         "NonMaxSuppression",
                                         "Range",
                                         "DynamicQuantizeLinear",
                                         "TfIdfVectorizer",
                                         "RandomNormal",
                                         "RandomUniform",
                                         "RandomNormalLike",
                                         "RandomUniformLike",
                                         "EyeLike",
                                         "Bernoulli",
                                         "Multinomial",
                                         "MelWeightMatrix",
                                         "QLinearConv",
                                         "QLinearMatMul",
                                         "ConvInteger",
                                         "MatMulInteger"};
  return ops;
}

bool IsOp(const ir::Node* n, const char* op) {
  return n && n->domain().empty() && n->op_type() == op;
}
bool IsQ(const ir::Node* n) { return IsOp(n, "QuantizeLinear"); }
bool IsDQ(const ir::Node* n) { return IsOp(n, "DequantizeLinear"); }

bool IsFloat32(const ir::Value* v) {
  if (!v) return false;
  if (v->initializer) return v->initializer->dtype() == kF32;
  return v->type.is_tensor() && v->type.dtype == kF32;
}

bool UnknownType(const ir::Value* v) {
  return v && !v->initializer && (!v->type.is_tensor() || v->type.dtype == ir::DType::kUndefined);
}

// Inputs fixed to float32 whatever the data's dtype (Resize-19's scales), outputs likewise
// (LayerNormalization's Mean and InvStdDev follow stash_type, float32).
bool FixedFloat32Input(const ir::Node& n, size_t i) {
  return n.domain().empty() && n.op_type() == "Resize" && i == 2;
}
bool FixedFloat32Output(const ir::Node& n, size_t i) {
  return n.domain().empty() && n.op_type() == "LayerNormalization" && i >= 1;
}
// Inputs of any dtype: reading them needs no Cast.
bool AnyTypeInput(const ir::Node& n, size_t i) {
  const std::string& op = n.op_type();
  return n.domain().empty() && i == 0 &&
         (op == "Shape" || op == "Size" || op == "Cast" || op == "CastLike");
}

bool HasBody(const ir::Node& n) {
  for (const ir::Attribute& a : n.attributes()) {
    if (!a.graphs.empty()) return true;
  }
  return false;
}

float AbsMax(const ir::Tensor& t) {
  float m = 0.0f;
  const float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::isfinite(p[i])) m = std::max(m, std::fabs(p[i]));
  }
  return m;
}

std::string Sci(float v) { return fmt::format("{:.3g}", v); }

// Float data of `t` rounded to `dtype` (FP16/BF16); `t` is float32 (checked by the callers).
ir::Tensor ConvertTensor(const ir::Tensor& t, ir::DType dtype) {
  return ir::ConvertFloatTensor(t, dtype).value();
}

class Converter {
 public:
  Converter(ir::Model& model, const quant::FloatPrecision& precision)
      : model_(model), g_(*model.graph), fp_(precision), low_(ToIrDType(precision.dtype)) {}

  Status Run(PassReport* report) {
    // The types decide everything: infer those the model does not declare (declared ones stay).
    QK_RETURN_IF_ERROR(ir::InferShapes(model_));
    QK_RETURN_IF_ERROR(g_.SortTopologically());
    CollectCaptures();
    Classify();
    QK_RETURN_IF_ERROR(ResolveDequantize());
    ResolveQuantize();
    SnapshotStored();
    QK_RETURN_IF_ERROR(InsertEdgeCasts());
    QK_RETURN_IF_ERROR(CastGraphOutputs());
    ConvertInitializers();
    ApplyTypes();
    QK_RETURN_IF_ERROR(g_.SortTopologically());
    QK_RETURN_IF_ERROR(ir::Verify(model_));
    int64_t fp32 = 0, low = 0;
    for (const auto& [node, dtype] : prec_) (dtype == kF32 ? fp32 : low) += 1;
    report->Add(counter::kCastsInserted, casts_);
    report->Add(counter::kFp32Nodes, fp32);
    report->lists[std::string(list::kFp32NodeReasons)] = fp32_reasons_;
    report->changed = true;
    report->summary = fmt::format("float part in {}: {} nodes in {}, {} kept in FP32, {} Cast(s)",
                                  quant::FloatDTypeName(fp_.dtype), low,
                                  quant::FloatDTypeName(fp_.dtype), fp32, casts_);
    return Status::Ok();
  }

 private:
  // Main-graph values that a body reads (captures): they stay float32 for the bodies.
  void CollectCaptures() {
    for (ir::Node* n : g_.nodes()) {
      if (!HasBody(*n)) continue;
      for (ir::Attribute& a : n->attributes()) {
        for (auto& body : a.graphs) {
          ir::ForEachGraph(*body, [&](ir::Graph& b) {
            for (ir::Value* v : b.values()) {
              if (v->is_outer_scope()) captured_.insert(v->name());
            }
          });
        }
      }
    }
  }

  // The float tensor a DQ output stands for (the Q's input), for the statistics' names.
  static std::string SourceName(const ir::Value* v) {
    const ir::Node* p = v->producer();
    if (IsDQ(p) && p->input(0) && IsQ(p->input(0)->producer()) &&
        p->input(0)->producer()->input(0)) {
      return p->input(0)->producer()->input(0)->name();
    }
    return v->name();
  }

  // Why the dtype cannot hold initializer `w` ("" when it can): its largest |value| rounds to
  // inf or to 0.
  std::string InitializerProblem(const ir::Value* w) {
    auto it = initializer_problem_.find(w);
    if (it != initializer_problem_.end()) return it->second;
    const float amax = AbsMax(*w->initializer);
    const float r = ir::RoundToFloatType(amax, low_);
    std::string why;
    if (std::isinf(r)) {
      why = fmt::format("initializer '{}' holds |values| up to {}, beyond {}'s range", w->name(),
                        Sci(amax), quant::FloatDTypeName(fp_.dtype));
    } else if (amax > 0.0f && r == 0.0f) {
      why = fmt::format("initializer '{}' (|values| <= {}) would become 0 in {}", w->name(),
                        Sci(amax), quant::FloatDTypeName(fp_.dtype));
    }
    return initializer_problem_[w] = why;
  }

  // Why node `n` must compute in FP32 ("" when it may compute in the low dtype).
  std::string Fp32Reason(const ir::Node& n) {
    if (auto it = fp_.fp32_nodes.find(n.name); !n.name.empty() && it != fp_.fp32_nodes.end())
      return it->second;
    if (auto it = fp_.fp32_op_types.find(n.op_type());
        n.domain().empty() && it != fp_.fp32_op_types.end()) {
      return it->second;
    }
    if (!n.domain().empty())
      return fmt::format("custom domain '{}': its types are unknown", n.domain());
    if (HasBody(n)) return "holds a body (If/Loop/Scan bodies stay FP32)";
    if (NoLowPrecisionOps().count(n.op_type())) {
      return fmt::format("ONNX defines no {} version of {}", quant::FloatDTypeName(fp_.dtype),
                         n.op_type());
    }
    for (const ir::Value* v : n.outputs()) {
      if (UnknownType(v)) return fmt::format("output '{}' has an unknown type", v->name());
      if (v && fp_.fp32_tensors.count(v->name()))
        return "writes '" + v->name() + "': " + fp_.fp32_tensors.at(v->name());
      if (v && captured_.count(v->name()))
        return "'" + v->name() + "' is read inside a body, which stays FP32";
    }
    for (const ir::Value* v : n.inputs()) {
      if (!v) continue;
      if (UnknownType(v)) return fmt::format("input '{}' has an unknown type", v->name());
      const std::string source = SourceName(v);
      if (fp_.fp32_tensors.count(source))
        return "reads '" + source + "': " + fp_.fp32_tensors.at(source);
      if (v->is_constant() && IsFloat32(v)) {
        const std::string why = InitializerProblem(v);
        if (!why.empty()) return why;
      }
    }
    return "";
  }

  void SetFp32(const ir::Node* n, const std::string& reason) {
    if (prec_[n] == kF32 && reason_.count(n)) return;
    prec_[n] = kF32;
    reason_[n] = reason;
    fp32_reasons_.push_back(
        fmt::format("{} ({}): {}", n->name.empty() ? "<unnamed>" : n->name, n->op_type(), reason));
  }

  void Classify() {
    for (const ir::Node* n : g_.nodes()) {
      if (IsQ(n) || IsDQ(n)) continue;
      bool touches = false;
      for (const ir::Value* v : n->inputs()) touches |= IsFloat32(v) || UnknownType(v);
      for (const ir::Value* v : n->outputs()) touches |= IsFloat32(v) || UnknownType(v);
      if (!touches) continue;
      const std::string why = Fp32Reason(*n);
      if (why.empty()) {
        prec_[n] = low_;
      } else {
        SetFp32(n, why);
      }
    }
    // Inputs ONNX fixes to float32 (Resize's scales) are computed in FP32 all the way back: a
    // scale computed in FP16 (Shape -> Cast -> Div -> Resize) would be rounded.
    std::vector<const ir::Value*> work;
    for (const ir::Node* n : g_.nodes()) {
      for (size_t i = 0; i < n->num_inputs(); ++i) {
        if (FixedFloat32Input(*n, i) && n->input(i)) work.push_back(n->input(i));
      }
    }
    std::set<const ir::Node*> walked;
    while (!work.empty()) {
      const ir::Value* v = work.back();
      work.pop_back();
      const ir::Node* p = v->producer();
      if (!p || !prec_.count(p) || !walked.insert(p).second) continue;
      SetFp32(p, "computes a float32 input of ONNX (Resize scales)");
      for (const ir::Value* in : p->inputs()) {
        if (IsFloat32(in) && !in->is_constant()) work.push_back(in);
      }
    }
    // A scale the low dtype cannot hold within half an INT8 step keeps its DQ, and so the
    // DQ's consumers, in FP32.
    for (const ir::Node* d : g_.nodes()) {
      if (!IsDQ(d) || !d->input(1) || !d->input(1)->initializer || !IsFloat32(d->input(1)))
        continue;
      const ir::Tensor& s = *d->input(1)->initializer;
      for (int64_t i = 0; i < s.numel(); ++i) {
        const float v = s.data_as<float>()[i];
        const float r = ir::RoundToFloatType(v, low_);
        if (!(std::fabs(r - v) <= v * kMaxScaleRounding)) {
          const std::string why = fmt::format(
              "scale of '{}' ({}) is {} in {}: more than half an INT8 step off",
              SourceName(d->output(0)), Sci(v), Sci(r), quant::FloatDTypeName(fp_.dtype));
          for (const ir::Use& u : d->output(0)->uses()) {
            if (prec_.count(u.node)) SetFp32(u.node, why);
          }
          fp32_dq_.insert(d);
          break;
        }
      }
    }
  }

  // The dtype a use reads a float value in (nullopt: any).
  std::optional<ir::DType> Required(const ir::Node* n, size_t i) const {
    if (IsQ(n)) return i <= 1 ? std::optional<ir::DType>(q_dtype_.at(n)) : std::nullopt;
    if (IsDQ(n)) return i == 1 ? std::optional<ir::DType>(dq_dtype_.at(n)) : std::nullopt;
    const auto it = prec_.find(n);
    if (it == prec_.end() || AnyTypeInput(*n, i)) return std::nullopt;
    if (FixedFloat32Input(*n, i)) return kF32;
    return it->second;
  }

  ir::DType OutputDType() const { return fp_.cast_io ? low_ : kF32; }

  // Each DQ takes the dtype its consumers read; a second copy serves FP32 consumers when they
  // disagree (a Q before it is copied too), so that no Cast sits between a DQ and its consumer.
  Status ResolveDequantize() {
    for (ir::Node* d : g_.nodes()) {
      if (!IsDQ(d)) continue;
      std::map<ir::DType, std::vector<ir::Use>> groups;
      ir::Value* y = d->output(0);
      for (const ir::Use& u : y->uses()) {
        if (IsQ(u.node) || IsDQ(u.node)) {
          groups[kF32].push_back(u);  // chains of Q/DQ: left in float32
          continue;
        }
        const auto it = prec_.find(u.node);
        if (it == prec_.end() || AnyTypeInput(*u.node, static_cast<size_t>(u.input_index)))
          continue;
        groups[FixedFloat32Input(*u.node, static_cast<size_t>(u.input_index)) ? kF32 : it->second]
            .push_back(u);
      }
      const bool must_f32 = fp32_dq_.count(d) || captured_.count(y->name()) || !IsFloat32(y) ||
                            (y->is_graph_output() && OutputDType() == kF32 && groups.empty());
      if (must_f32 || groups.empty()) {
        dq_dtype_[d] = must_f32 ? kF32 : low_;
        continue;
      }
      if (groups.size() == 1) {
        dq_dtype_[d] = groups.begin()->first;
        continue;
      }
      // Mixed: `d` serves the low dtype, a copy serves FP32.
      dq_dtype_[d] = low_;
      QK_ASSIGN_OR_RETURN(ir::Node * copy, CopyDequantize(d));
      dq_dtype_[copy] = kF32;
      for (const ir::Use& u : groups[kF32])
        g_.SetNodeInput(u.node, static_cast<size_t>(u.input_index), copy->output(0));
    }
    return Status::Ok();
  }

  static void CopyIntAttrs(const ir::Node& from, ir::Node* to) {
    for (const ir::Attribute& a : from.attributes()) {
      if (a.type == ir::AttrType::kInt) to->SetAttr(ir::Attribute::Int(a.name, a.i));
    }
  }

  Result<ir::Node*> CopyDequantize(ir::Node* d) {
    ir::Value* in = d->input(0);
    ir::Node* q = in ? in->producer() : nullptr;
    if (IsQ(q) && in->uses().size() == 1) {
      QK_ASSIGN_OR_RETURN(ir::Node * q2,
                          g_.InsertNodeBefore(d, "QuantizeLinear", q->inputs(),
                                              {g_.UniqueValueName(in->name() + "_fp32")}, "",
                                              g_.UniqueNodeName(q->name + "_fp32")));
      CopyIntAttrs(*q, q2);
      q2->output(0)->type = in->type;
      in = q2->output(0);
      q_copies_.insert(q2);
    }
    std::vector<ir::Value*> inputs = d->inputs();
    inputs[0] = in;
    QK_ASSIGN_OR_RETURN(
        ir::Node * d2, g_.InsertNodeBefore(d, "DequantizeLinear", inputs,
                                           {g_.UniqueValueName(d->output(0)->name() + "_fp32")}, "",
                                           g_.UniqueNodeName(d->name + "_fp32")));
    CopyIntAttrs(*d, d2);
    d2->output(0)->type = d->output(0)->type;
    return d2;
  }

  // A Q takes the dtype of its DQs (they share its scale); with none, or DQs that disagree, the
  // dtype of its input.
  void ResolveQuantize() {
    for (ir::Node* q : g_.nodes()) {
      if (!IsQ(q)) continue;
      std::set<ir::DType> seen;
      for (const ir::Use& u : q->output(0)->uses()) {
        if (IsDQ(u.node)) seen.insert(dq_dtype_.at(u.node));
      }
      q_dtype_[q] = seen.size() == 1 ? *seen.begin() : kF32;
      if (seen.size() != 1 && q->input(0) && !q->input(0)->initializer)
        pending_input_q_.push_back(q);
    }
  }

  // The dtype each float32 value (not an initializer) is written in.
  void SnapshotStored() {
    for (ir::Value* v : g_.values()) {
      if (!IsFloat32(v) || v->initializer) continue;
      ir::DType d = kF32;
      const ir::Node* p = v->producer();
      if (v->is_graph_input()) {
        d = OutputDType();
      } else if (IsDQ(p)) {
        d = dq_dtype_.at(p);
      } else if (p && prec_.count(p)) {
        d = FixedFloat32Output(*p, static_cast<size_t>(v->producer_output())) ? kF32 : prec_.at(p);
      }
      stored_[v] = d;
    }
    // A Q whose DQs disagree reads its input as it is written.
    for (ir::Node* q : pending_input_q_) {
      const auto it = stored_.find(q->input(0));
      if (it != stored_.end()) q_dtype_[q] = it->second;
    }
  }

  Result<ir::Value*> CastOf(ir::Value* v, ir::DType to, ir::Node* before) {
    const auto key = std::make_pair(v, to);
    if (auto it = casts_of_.find(key); it != casts_of_.end()) return it->second;
    const std::string suffix =
        to == kF32 ? "_fp32" : std::string("_") + quant::FloatDTypeName(fp_.dtype);
    QK_ASSIGN_OR_RETURN(
        ir::Node * cast,
        g_.InsertNodeBefore(before, "Cast", {v}, {g_.UniqueValueName(v->name() + suffix)}, "",
                            g_.UniqueNodeName(v->name() + "_Cast" + suffix)));
    cast->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(to)));
    cast->output(0)->type = v->type;
    cast->output(0)->type.dtype = to;
    ++casts_;
    return casts_of_[key] = cast->output(0);
  }

  Status InsertEdgeCasts() {
    for (auto& [v, dtype] : stored_) {
      const std::vector<ir::Use> uses = v->uses();
      for (const ir::Use& u : uses) {
        const std::optional<ir::DType> need = Required(u.node, static_cast<size_t>(u.input_index));
        if (!need || *need == dtype) continue;
        QK_ASSIGN_OR_RETURN(ir::Value * c, CastOf(v, *need, u.node));
        g_.SetNodeInput(u.node, static_cast<size_t>(u.input_index), c);
      }
    }
    return Status::Ok();
  }

  // A graph output keeps its name and float32 type: the value computed in the low dtype is
  // renamed and a Cast writes the output.
  Status CastGraphOutputs() {
    const std::vector<ir::Value*> outputs = g_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      ir::Value* v = outputs[i];
      const auto it = stored_.find(v);
      if (it == stored_.end() || it->second == OutputDType()) continue;
      const std::string name = v->name();
      const std::string suffix =
          it->second == kF32 ? "_fp32" : std::string("_") + quant::FloatDTypeName(fp_.dtype);
      QK_RETURN_IF_ERROR(g_.RenameValue(v, g_.UniqueValueName(name + suffix)));
      QK_ASSIGN_OR_RETURN(ir::Node * cast,
                          g_.AddNode("Cast", {v}, {g_.UniqueValueName(name + "_cast")}, "",
                                     g_.UniqueNodeName(name + "_Cast")));
      cast->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(OutputDType())));
      ir::Value* out = cast->output(0);
      out->type = v->type;
      out->type.dtype = OutputDType();
      out->has_value_info = v->has_value_info;
      out->doc_string = v->doc_string;
      out->metadata_props = v->metadata_props;
      g_.SetOutput(i, out);
      QK_RETURN_IF_ERROR(g_.RenameValue(out, name));
      ++casts_;
    }
    return Status::Ok();
  }

  // Float32 initializers are converted in place when every reader wants the low dtype, copied
  // when readers disagree, kept otherwise (captured ones stay float32 for the bodies).
  void ConvertInitializers() {
    for (ir::Value* w : g_.initializers()) {
      if (!IsFloat32(w) || w->is_graph_input()) continue;
      std::vector<ir::Use> low_uses;
      bool f32_use = captured_.count(w->name()) > 0 || w->is_graph_output();
      for (const ir::Use& u : w->uses()) {
        const std::optional<ir::DType> need = Required(u.node, static_cast<size_t>(u.input_index));
        if (!need) continue;
        if (*need == kF32) {
          f32_use = true;
        } else {
          low_uses.push_back(u);
        }
      }
      if (low_uses.empty()) continue;
      ir::Tensor converted = ConvertTensor(*w->initializer, low_);
      if (!f32_use) {
        converted.name = w->name();
        w->initializer = std::move(converted);
        w->type.dtype = low_;
        continue;
      }
      ir::Value* copy =
          g_.AddInitializer(g_.UniqueValueName(w->name() + "_" + quant::FloatDTypeName(fp_.dtype)),
                            std::move(converted));
      copy->initializer->name = copy->name();
      copy->type = w->type;
      copy->type.dtype = low_;
      for (const ir::Use& u : low_uses)
        g_.SetNodeInput(u.node, static_cast<size_t>(u.input_index), copy);
    }
  }

  void ApplyTypes() {
    for (auto& [v, dtype] : stored_) v->type.dtype = dtype;
    for (auto& [n, dtype] : prec_) {
      if (dtype == kF32) continue;
      ir::Node* node = const_cast<ir::Node*>(n);
      if (IsOp(node, "Cast") && node->GetInt("to", 0) == static_cast<int64_t>(kF32)) {
        node->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(low_)));
      } else if (IsOp(node, "ConstantOfShape")) {
        if (const ir::Attribute* a = node->attr("value"); a && a->t.dtype() == kF32) {
          node->SetAttr(ir::Attribute::TensorValue("value", ConvertTensor(a->t, low_)));
        }
      }
    }
  }

  ir::Model& model_;
  ir::Graph& g_;
  const quant::FloatPrecision& fp_;
  ir::DType low_;
  std::unordered_set<std::string> captured_;
  std::unordered_map<const ir::Value*, std::string> initializer_problem_;
  std::map<const ir::Node*, ir::DType> prec_;  // regular nodes that touch float tensors
  std::unordered_map<const ir::Node*, std::string> reason_;
  std::vector<std::string> fp32_reasons_;
  std::set<const ir::Node*> fp32_dq_;
  std::unordered_map<const ir::Node*, ir::DType> dq_dtype_, q_dtype_;
  std::set<const ir::Node*> q_copies_;
  std::vector<ir::Node*> pending_input_q_;
  std::map<ir::Value*, ir::DType> stored_;
  std::map<std::pair<ir::Value*, ir::DType>, ir::Value*> casts_of_;
  int64_t casts_ = 0;
};

}  // namespace

ir::DType ToIrDType(quant::FloatDType dtype) {
  switch (dtype) {
    case quant::FloatDType::kFloat16:
      return ir::DType::kFloat16;
    case quant::FloatDType::kBFloat16:
      return ir::DType::kBFloat16;
    case quant::FloatDType::kFloat32:
      return ir::DType::kFloat;
  }
  return ir::DType::kFloat;
}

std::string FloatRangeProblem(float amax, quant::FloatDType dtype) {
  if (dtype == quant::FloatDType::kFloat32 || !std::isfinite(amax)) return "";
  const bool half = dtype == quant::FloatDType::kFloat16;
  const float max = half ? ir::kFloat16Max : ir::kBFloat16Max;
  const float min_normal = half ? ir::kFloat16MinNormal : ir::kBFloat16MinNormal;
  const char* name = quant::FloatDTypeName(dtype);
  if (amax > max / kFloat16RangeMargin) {
    return fmt::format(
        "calibrated |values| reach {}, above {}'s largest value {} / {} (the margin for data beyond "
        "the calibration's)",
        Sci(amax), name, Sci(max), kFloat16RangeMargin);
  }
  if (amax > 0.0f && amax < min_normal) {
    return fmt::format(
        "calibrated |values| stay below {} ({}), {}'s smallest normal: {} would flush or round them",
        Sci(min_normal), Sci(amax), name, name);
  }
  return "";
}

int64_t MarkPlanRangeFp32Tensors(quant::QuantPlan* plan) {
  quant::FloatPrecision& fp = plan->float_precision;
  int64_t added = 0;
  for (const auto& [name, t] : plan->tensors) {
    if (t.role != quant::TensorRole::kActivation || t.amax.empty()) continue;
    const std::string why = FloatRangeProblem(t.amax.front(), fp.dtype);
    if (!why.empty() && fp.fp32_tensors.emplace(name, why + " (the plan's range)").second) ++added;
  }
  return added;
}

Status ResolveFloatOptions(const ir::Graph& graph, const FloatOptions& options,
                           quant::FloatPrecision* precision) {
  precision->dtype = options.dtype;
  precision->cast_io = options.cast_io;
  std::vector<std::string> names, op_types;
  for (const ir::Node* n : graph.nodes()) {
    if (!n->name.empty()) names.push_back(n->name);
    if (std::find(op_types.begin(), op_types.end(), n->op_type()) == op_types.end())
      op_types.push_back(n->op_type());
  }
  for (const std::string& key : options.keep_fp32) {
    // Exporters' node names (/layer1/Conv) never look like op types: a key may be either.
    const bool is_name = std::find(names.begin(), names.end(), key) != names.end();
    const bool is_op = std::find(op_types.begin(), op_types.end(), key) != op_types.end();
    if (is_name) precision->fp32_nodes[key] = "kept in FP32 by request (--keep-fp32)";
    if (is_op)
      precision->fp32_op_types[key] = "op type " + key + " kept in FP32 by request (--keep-fp32)";
    if (is_name || is_op) continue;
    std::vector<std::string> candidates = names;
    candidates.insert(candidates.end(), op_types.begin(), op_types.end());
    return MakeStatus(StatusCode::kNotFound,
                      "--keep-fp32 '{}' matches no named node or op type of the model{}",
                      EscapeControl(key), DidYouMean(key, candidates, "node names and op types"));
  }
  return Status::Ok();
}

Status ConvertFloatPrecision::Run(ir::Model& model, PassReport* report) const {
  report->Add(counter::kCastsInserted, 0);
  report->Add(counter::kFp32Nodes, 0);
  report->lists[std::string(list::kFp32NodeReasons)] = {};
  if (precision_.dtype == quant::FloatDType::kFloat32) return Status::Ok();
  // Pinned nodes that name nothing are an error: a typo must not silently leave a layer in FP16.
  std::set<std::string> names;
  for (const ir::Node* n : model.graph->nodes()) names.insert(n->name);
  for (const auto& [node, reason] : precision_.fp32_nodes) {
    QK_RETURN_IF_NOT(names.count(node), StatusCode::kNotFound,
                     "node '{}' kept in FP32 ({}) is not a node of the model's main graph", node,
                     reason);
  }
  PassReport upgrade;
  QK_RETURN_IF_ERROR(UpgradeOpset(kFloat16QdqOpset).Run(model, &upgrade));
  QK_RETURN_IF_ERROR(Converter(model, precision_).Run(report));
  if (upgrade.changed) report->notes.push_back(upgrade.summary + " (FP16/BF16 Q/DQ need opset 19)");
  return Status::Ok();
}

}  // namespace quantkit::passes
