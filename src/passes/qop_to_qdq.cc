#include "passes/qop_to_qdq.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "ir/clone.h"
#include "ir/verifier.h"
#include "passes/strip_qdq.h"
#include "quant/params.h"

namespace quantkit::passes {
namespace {

constexpr char kMsDomain[] = "com.microsoft";
constexpr char kQuantizedSuffix[] = "_quantized";  // onnxruntime's name for x's integer twin
constexpr int64_t kOnnxFloat = 1;                  // TensorProto.FLOAT, Cast's `to`

bool IsDefaultOp(const ir::Node* n, const char* op) {
  return n && n->domain().empty() && n->op_type() == op;
}

// Ops rewritten here (default domain), and every com.microsoft integer op (QGemm, QLinear*, and
// the ones we do not convert, which are then reported by name). Not QuickGelu: a float op.
bool IsIntegerOp(const ir::Node& n) {
  static const std::set<std::string> kDefault{"QLinearConv", "QLinearMatMul", "ConvInteger",
                                              "MatMulInteger", "DynamicQuantizeLinear"};
  static const std::set<std::string> kMs{"QGemm", "QAttention", "QEmbedLayerNormalization",
                                         "DynamicQuantizeMatMul", "MatMulIntegerToFloat"};
  if (n.domain().empty()) return kDefault.count(n.op_type()) > 0;
  if (n.domain() != kMsDomain) return false;
  const std::string& op = n.op_type();
  return kMs.count(op) > 0 || op.rfind("QLinear", 0) == 0 || op.rfind("QOrdered", 0) == 0;
}

// Ops whose output uses the input's quantization grid unchanged (they move or select elements),
// so a Q/DQ pair with the same scale and zero point goes around them.
const std::set<std::string>& GridPreservingOps() {
  static const std::set<std::string> kOps{"MaxPool", "Reshape",   "Flatten",      "Transpose",
                                          "Squeeze", "Unsqueeze", "Identity",     "Slice",
                                          "Gather",  "Expand",    "DepthToSpace", "SpaceToDepth"};
  return kOps;
}

Result<std::vector<float>> ConstFloats(const ir::Node& n, size_t index, const char* what) {
  const ir::Value* v = n.input(index);
  QK_RETURN_IF_NOT(v && v->initializer && v->initializer->dtype() == ir::DType::kFloat,
                   StatusCode::kUnsupported, "{}: {} (input {}) must be a float constant",
                   n.Describe(), what, index);
  const ir::Tensor& t = *v->initializer;
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

// Integer constant (int8/uint8/int32) as int32; an absent input reads as {0} (ONNX default).
Result<std::vector<int32_t>> ConstInts(const ir::Node& n, size_t index, const char* what) {
  const ir::Value* v = n.input(index);
  if (!v) return std::vector<int32_t>{0};
  QK_RETURN_IF_NOT(v->initializer, StatusCode::kUnsupported, "{}: {} '{}' must be a constant",
                   n.Describe(), what, v->name());
  const ir::Tensor& t = *v->initializer;
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case ir::DType::kInt8:
        out[i] = t.data_as<int8_t>()[i];
        break;
      case ir::DType::kUint8:
        out[i] = t.data_as<uint8_t>()[i];
        break;
      case ir::DType::kInt32:
        out[i] = t.data_as<int32_t>()[i];
        break;
      default:
        return MakeStatus(StatusCode::kUnsupported, "{}: {} '{}' is {}; expected int8/uint8/int32",
                          n.Describe(), what, v->name(), ir::DTypeName(t.dtype()));
    }
  }
  return out;
}

bool SameConstant(const ir::Value* a, const ir::Value* b) {
  if (a == b) return true;
  return a && b && a->initializer && b->initializer &&
         a->initializer->ContentEquals(*b->initializer);
}

// Integer ops carry no graph attributes, and a subgraph that imported clones: cannot fail.
ir::Attribute CloneAttr(const ir::Attribute& a) {
  Result<ir::Attribute> c = ir::CloneAttribute(a, nullptr);
  QK_CHECK(c.ok(), "cloning attribute '{}': {}", a.name, c.status().ToString());
  return std::move(c).value();
}

std::vector<ir::Attribute> CloneAttrs(const ir::Node& n, const std::set<std::string>& skip = {}) {
  std::vector<ir::Attribute> out;
  for (const ir::Attribute& a : n.attributes()) {
    if (!skip.count(a.name)) out.push_back(CloneAttr(a));
  }
  return out;
}

struct QParams {
  ir::Value* scale = nullptr;
  ir::Value* zero_point = nullptr;  // may be null (zero, uint8)
};

// What Rewriter counts while it sweeps (QOperatorToQdq::Run turns it into the PassReport).
struct QopTally {
  int64_t nodes_converted = 0;
  int64_t passthrough_nodes = 0;
  int64_t relus_restored = 0;
  std::vector<std::string> dynamic_tensors;
  std::vector<std::string> notes;
};

class Rewriter {
 public:
  explicit Rewriter(ir::Model& model) : model_(model), g_(*model.graph) {}

  Result<QopTally> Run() {
    QK_RETURN_IF_ERROR(g_.SortTopologically());
    // Static Q nodes of run-time tensors start the integer domain: remember their grids.
    for (ir::Node* n : g_.nodes()) {
      if (IsDefaultOp(n, "QuantizeLinear") && n->input(0) && !n->input(0)->is_constant()) {
        qparams_[n->output(0)] = {n->input(1), n->input(2)};
      }
    }
    // One sweep in topological order. A conversion inserts its (float, DQ, Q) replacements
    // before the node, which need no conversion, and removes the node and the pattern nodes it
    // absorbed (removed_), which the sweep skips. A node's integer inputs are all produced by
    // earlier nodes, so whether it needs conversion is known when the sweep reaches it.
    const std::vector<ir::Node*> order = g_.nodes();  // a copy: conversions edit the graph
    for (ir::Node* n : order) {
      if (removed_.count(n) || !NeedsConversion(*n)) continue;
      QK_RETURN_IF_ERROR(Convert(n));
    }
    RemoveDeadNodes();
    RemoveUnusedInitializers(g_);
    for (const ir::Node* n : g_.nodes()) {
      QK_RETURN_IF_NOT(!IsIntegerOp(*n), StatusCode::kUnsupported,
                       "{}: left in the graph after conversion (its outputs are still used)",
                       n->Describe());
    }
    bool ms_used = false;
    for (const ir::Node* n : g_.nodes()) ms_used |= n->domain() == kMsDomain;
    if (!ms_used) {
      auto& ops = model_.opset_imports;
      ops.erase(std::remove_if(ops.begin(), ops.end(),
                               [](const ir::OpsetImport& o) { return o.domain == kMsDomain; }),
                ops.end());
    }
    QK_RETURN_IF_ERROR(ir::Verify(model_));
    return report_;
  }

 private:
  bool ReadsIntegerActivation(const ir::Node& n) const {
    if (IsDefaultOp(&n, "DequantizeLinear")) return false;
    for (const ir::Value* v : n.inputs()) {
      if (v && qparams_.count(v)) return true;
    }
    return false;
  }

  bool NeedsConversion(const ir::Node& n) const {
    if (IsDefaultOp(&n, "DynamicQuantizeLinear")) return false;  // removed with its consumers
    return IsIntegerOp(n) || ReadsIntegerActivation(n);
  }

  using Converter = Status (*)(Rewriter&, ir::Node*);
  struct OpKey {
    std::string domain, op_type;
    bool operator<(const OpKey& o) const {
      return std::tie(domain, op_type) < std::tie(o.domain, o.op_type);
    }
  };

  // {domain, op_type} -> its conversion; one entry per op this pass rewrites.
  static const std::map<OpKey, Converter>& Converters() {
    static const std::map<OpKey, Converter> table = [] {
      std::map<OpKey, Converter> t{
          {{"", "QLinearConv"}, [](Rewriter& r, ir::Node* n) { return r.ConvertQLinearConv(n); }},
          {{"", "QLinearMatMul"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertQLinearMatMul(n); }},
          {{"", "ConvInteger"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertIntegerPattern(n); }},
          {{"", "MatMulInteger"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertIntegerPattern(n); }},
          {{kMsDomain, "QGemm"}, [](Rewriter& r, ir::Node* n) { return r.ConvertQGemm(n); }},
          {{kMsDomain, "QLinearAdd"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertBinary(n, "Add"); }},
          {{kMsDomain, "QLinearMul"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertBinary(n, "Mul"); }},
          {{kMsDomain, "QLinearSigmoid"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertUnary(n, "Sigmoid", {}); }},
          {{kMsDomain, "QLinearLeakyRelu"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertUnary(n, "LeakyRelu", {}); }},
          {{kMsDomain, "QLinearGlobalAveragePool"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertPool(n); }},
          {{kMsDomain, "QLinearAveragePool"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertPool(n); }},
          {{kMsDomain, "QLinearConcat"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertConcat(n); }},
          {{kMsDomain, "QLinearSoftmax"},
           [](Rewriter& r, ir::Node* n) { return r.ConvertSoftmax(n); }},
      };
      for (const std::string& op : GridPreservingOps()) {
        t.emplace(OpKey{"", op}, [](Rewriter& r, ir::Node* n) { return r.ConvertPassthrough(n); });
      }
      return t;
    }();
    return table;
  }

  Status Convert(ir::Node* n) {
    const auto& table = Converters();
    if (auto it = table.find({n->domain(), n->op_type()}); it != table.end())
      return it->second(*this, n);
    return MakeStatus(StatusCode::kUnsupported,
                      "{}: not convertible to a float op (supported: QLinearConv, QLinearMatMul, "
                      "QGemm, ConvInteger, MatMulInteger, DynamicQuantizeLinear, QLinearAdd/Mul/"
                      "Sigmoid/LeakyRelu/Softmax/Concat/AveragePool/GlobalAveragePool, and "
                      "MaxPool/shape ops on integer tensors)",
                      n->Describe());
  }

  // "<x>_quantized" -> "<x>" when that name is free (the original float model's name). A
  // leftover value_info entry of the float model (no producer, no uses) does not hold the name.
  std::string FloatName(const std::string& name) {
    const std::string suffix = kQuantizedSuffix;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string base = name.substr(0, name.size() - suffix.size());
      ir::Value* v = g_.FindValue(base);
      if (v && !v->producer() && v->uses().empty() && !v->is_initializer() &&
          !v->is_graph_input() && !v->is_graph_output() && g_.RemoveValue(v).ok()) {
        v = nullptr;
      }
      if (!v) return base;
    }
    return g_.UniqueValueName(name + "_float");
  }

  std::string NodeName(const ir::Node& n, const std::string& fallback) const {
    std::string base = n.name.empty() ? fallback : n.name;
    const std::string suffix = "_quant";
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      base.resize(base.size() - suffix.size());
    }
    return g_.UniqueNodeName(base);
  }

  // Ops onnxruntime fuses a following Relu into (their QLinear/QGemm forms).
  static bool FusingOp(const std::string& op) {
    return op == "Conv" || op == "Gemm" || op == "MatMul" || op == "Add" || op == "Mul";
  }

  // True when the grid's lowest code is real 0 (zero point == qmin): values below 0 saturate.
  static bool FusedRelu(const QParams& p) {
    if (!p.scale || !p.scale->initializer || p.scale->initializer->numel() != 1) return false;
    if (!p.zero_point) return true;  // uint8, zero point 0
    if (!p.zero_point->initializer || p.zero_point->initializer->numel() != 1) return false;
    const ir::Tensor& z = *p.zero_point->initializer;
    if (z.dtype() == ir::DType::kUint8) return z.data_as<uint8_t>()[0] == 0;
    if (z.dtype() == ir::DType::kInt8) return z.data_as<int8_t>()[0] == -128;
    return false;
  }

  static void SetFloatType(ir::Value* v, const ir::TypeInfo& like) {
    v->type = like;
    if (v->type.is_tensor()) v->type.dtype = ir::DType::kFloat;
  }

  // The float value of integer tensor xq on grid p: a float initializer for constants, else the
  // output of the one DequantizeLinear that reads xq (created on first use, before `at`).
  Result<ir::Value*> Dequantized(ir::Value* xq, const QParams& p, ir::Node* at) {
    const ir::Node& user = *at;
    if (xq->is_constant()) {
      const ir::Tensor& t = *xq->initializer;
      QK_RETURN_IF_NOT(t.dtype() == ir::DType::kInt8 || t.dtype() == ir::DType::kUint8,
                       StatusCode::kUnsupported, "{}: constant '{}' is {}; expected int8/uint8",
                       user.Describe(), xq->name(), ir::DTypeName(t.dtype()));
      QK_RETURN_IF_NOT(p.scale && p.scale->initializer && p.scale->initializer->numel() == 1,
                       StatusCode::kUnsupported,
                       "{}: constant integer input '{}' needs a per-tensor constant scale",
                       user.Describe(), xq->name());
      const float s = p.scale->initializer->data_as<float>()[0];
      int32_t z = 0;
      if (p.zero_point && p.zero_point->initializer) {
        const ir::Tensor& zt = *p.zero_point->initializer;
        z = zt.dtype() == ir::DType::kInt8 ? zt.data_as<int8_t>()[0] : zt.data_as<uint8_t>()[0];
      }
      ir::Tensor out(ir::DType::kFloat, t.dims());
      float* dst = out.mutable_data_as<float>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        const int32_t v =
            t.dtype() == ir::DType::kInt8 ? t.data_as<int8_t>()[i] : t.data_as<uint8_t>()[i];
        dst[i] = quant::Dequantize(v, s, z);
      }
      return g_.AddInitializer(FloatName(xq->name()), std::move(out));
    }
    QK_RETURN_IF_NOT(!xq->is_graph_input(), StatusCode::kUnsupported,
                     "{}: reads integer graph input '{}'; give the model a float input "
                     "(QuantizeLinear inside the graph) to convert it",
                     user.Describe(), xq->name());
    for (const ir::Use& u : xq->uses()) {
      ir::Node* dq = u.node;
      if (IsDefaultOp(dq, "DequantizeLinear") && u.input_index == 0 &&
          SameConstant(dq->input(1), p.scale) && SameConstant(dq->input(2), p.zero_point)) {
        return dq->output(0);
      }
    }
    QK_RETURN_IF_NOT(qparams_.count(xq) == 0 || SameConstant(qparams_[xq].scale, p.scale),
                     StatusCode::kUnsupported,
                     "{}: reads '{}' with a scale other than the one it was quantized with",
                     user.Describe(), xq->name());
    QK_ASSIGN_OR_RETURN(ir::Node * dq,
                        g_.InsertNodeBefore(at, "DequantizeLinear", {xq, p.scale, p.zero_point},
                                            {g_.UniqueValueName(FloatName(xq->name()) + "_dq")}, "",
                                            g_.UniqueNodeName(xq->name() + "_DequantizeLinear")));
    SetFloatType(dq->output(0), xq->type);
    return dq->output(0);
  }

  // Integer weight behind a DequantizeLinear along `axis` (per channel; a single scale or zero
  // point is repeated per channel: the same grid, in the layout TensorRT wants).
  Result<ir::Value*> DequantizedWeight(ir::Value* wq, std::vector<float> scale,
                                       std::vector<int32_t> zero_point, int64_t axis,
                                       ir::Node* at) {
    QK_RETURN_IF_NOT(wq->is_constant() && (wq->initializer->dtype() == ir::DType::kInt8 ||
                                           wq->initializer->dtype() == ir::DType::kUint8),
                     StatusCode::kUnsupported, "{}: weight '{}' must be an int8/uint8 constant",
                     at->Describe(), wq->name());
    const ir::Tensor& w = *wq->initializer;
    QK_RETURN_IF_NOT(axis >= 0 && axis < w.rank(), StatusCode::kInvalidModel,
                     "{}: weight '{}' has rank {}, no channel axis {}", at->Describe(), wq->name(),
                     w.rank(), axis);
    const int64_t channels = w.dims()[static_cast<size_t>(axis)];
    auto widen = [&](auto& v, const char* what) -> Status {
      if (v.size() == 1) v.assign(static_cast<size_t>(channels), v.front());
      QK_RETURN_IF_NOT(static_cast<int64_t>(v.size()) == channels, StatusCode::kInvalidModel,
                       "{}: {} {} values for {} channels of weight '{}'", at->Describe(), v.size(),
                       what, channels, wq->name());
      return Status::Ok();
    };
    QK_RETURN_IF_ERROR(widen(scale, "scale"));
    QK_RETURN_IF_ERROR(widen(zero_point, "zero point"));
    const std::string base = FloatName(wq->name());
    ir::Value* s = g_.AddInitializer(g_.UniqueValueName(base + "_scale_per_channel"),
                                     ir::Tensor::FromVector(ir::DType::kFloat, {channels}, scale));
    ir::Tensor zt(w.dtype(), {channels});
    for (int64_t c = 0; c < channels; ++c) {
      if (w.dtype() == ir::DType::kInt8) {
        zt.mutable_data_as<int8_t>()[c] = static_cast<int8_t>(zero_point[static_cast<size_t>(c)]);
      } else {
        zt.mutable_data_as<uint8_t>()[c] = static_cast<uint8_t>(zero_point[static_cast<size_t>(c)]);
      }
    }
    ir::Value* z =
        g_.AddInitializer(g_.UniqueValueName(base + "_zero_point_per_channel"), std::move(zt));
    QK_ASSIGN_OR_RETURN(ir::Node * dq,
                        g_.InsertNodeBefore(at, "DequantizeLinear", {wq, s, z}, {base}, "",
                                            g_.UniqueNodeName(base + "_DequantizeLinear")));
    dq->SetAttr(ir::Attribute::Int("axis", axis));
    SetFloatType(dq->output(0), wq->type);
    return dq->output(0);
  }

  // Integer bias (int32, zero point 0) -> float initializer: b[i] * scale[i along last axis].
  Result<ir::Value*> FloatBias(ir::Node* n, size_t index, const std::vector<float>& scale) {
    ir::Value* b = n->input(index);
    if (!b) return static_cast<ir::Value*>(nullptr);
    QK_ASSIGN_OR_RETURN(std::vector<int32_t> q, ConstInts(*n, index, "bias"));
    const ir::Tensor& t = *b->initializer;
    const int64_t last = t.rank() == 0 ? 1 : t.dims().back();
    QK_RETURN_IF_NOT(scale.size() == 1 || static_cast<int64_t>(scale.size()) == last,
                     StatusCode::kInvalidModel, "{}: bias '{}' has {} channels, scales {}",
                     n->Describe(), b->name(), last, scale.size());
    ir::Tensor out(ir::DType::kFloat, t.dims());
    float* dst = out.mutable_data_as<float>();
    for (size_t i = 0; i < q.size(); ++i) {
      const float s = scale.size() == 1 ? scale[0] : scale[i % static_cast<size_t>(last)];
      dst[i] = static_cast<float>(q[i]) * s;
    }
    return g_.AddInitializer(FloatName(b->name()), std::move(out));
  }

  // Inserts `op(inputs)` before `old`, re-quantized with `out` when given, points every use of
  // `old_out` at the result, removes `remove` (in order; each must then be unused) and gives the
  // result old_out's name.
  Status Replace(ir::Node* old, const std::string& op, const std::vector<ir::Value*>& inputs,
                 std::vector<ir::Attribute> attrs, std::optional<QParams> out, ir::Value* old_out,
                 const std::vector<ir::Node*>& remove) {
    const std::string out_name = old_out->name();
    const ir::TypeInfo out_type = old_out->type;
    const std::string float_name =
        out ? FloatName(out_name) : g_.UniqueValueName(out_name + "_float");
    QK_ASSIGN_OR_RETURN(ir::Node * f,
                        g_.InsertNodeBefore(old, op, inputs, {float_name}, "", NodeName(*old, op)));
    for (ir::Attribute& a : attrs) f->SetAttr(std::move(a));
    SetFloatType(f->output(0), out_type);
    ir::Value* result = f->output(0);
    if (out && FusingOp(op) && FusedRelu(*out)) {
      // onnxruntime fuses a following Relu (and the lower bound of Clip(0, 6)) into the integer
      // op: the output grid starts at 0, so saturation does the Relu. A float op does not
      // saturate, so the Relu comes back explicitly; the float tensor keeps the name.
      QK_RETURN_IF_ERROR(g_.RenameValue(result, g_.UniqueValueName(float_name + "_before_relu")));
      QK_ASSIGN_OR_RETURN(ir::Node * relu,
                          g_.InsertNodeBefore(old, "Relu", {result}, {float_name}, "",
                                              g_.UniqueNodeName(f->name + "_Relu")));
      SetFloatType(relu->output(0), out_type);
      result = relu->output(0);
      ++report_.relus_restored;
    }
    if (out) {
      QK_ASSIGN_OR_RETURN(
          ir::Node * q,
          g_.InsertNodeBefore(old, "QuantizeLinear", {result, out->scale, out->zero_point},
                              {g_.UniqueValueName(out_name + "_requantized")}, "",
                              g_.UniqueNodeName(f->name + "_QuantizeLinear")));
      q->output(0)->type = out_type;
      result = q->output(0);
      qparams_[result] = *out;
    }
    g_.ReplaceAllUsesWith(old_out, result);
    for (ir::Node* r : remove) {
      for (ir::Value* o : r->outputs()) qparams_.erase(o);
      QK_RETURN_IF_ERROR(g_.RemoveNode(r));
      removed_.insert(r);
    }
    return g_.RenameValue(result, out_name);
  }

  Status ConvertQLinearConv(ir::Node* n) {
    QK_RETURN_IF_NOT(n->num_inputs() >= 8, StatusCode::kInvalidModel, "{}: expects 8 or 9 inputs",
                     n->Describe());
    QK_ASSIGN_OR_RETURN(std::vector<float> xs, ConstFloats(*n, 1, "x_scale"));
    QK_ASSIGN_OR_RETURN(std::vector<float> ws, ConstFloats(*n, 4, "w_scale"));
    QK_ASSIGN_OR_RETURN(std::vector<int32_t> wz, ConstInts(*n, 5, "w_zero_point"));
    QK_ASSIGN_OR_RETURN(ir::Value * x, Dequantized(n->input(0), {n->input(1), n->input(2)}, n));
    QK_ASSIGN_OR_RETURN(ir::Value * w, DequantizedWeight(n->input(3), ws, wz, 0, n));
    std::vector<float> bias_scale;
    for (float s : ws) bias_scale.push_back(xs.at(0) * s);  // float32, as onnxruntime quantizes it
    QK_ASSIGN_OR_RETURN(ir::Value * b, FloatBias(n, 8, bias_scale));
    std::vector<ir::Value*> inputs{x, w};
    if (b) inputs.push_back(b);
    ++report_.nodes_converted;
    return Replace(n, "Conv", inputs, CloneAttrs(*n), QParams{n->input(6), n->input(7)},
                   n->output(0), {n});
  }

  // b: a constant weight (per column, axis = last) or a run-time tensor.
  Result<ir::Value*> MatMulOperand(ir::Node* n, size_t index, int64_t weight_axis) {
    ir::Value* v = n->input(index);
    if (v && v->is_constant() && v->initializer->rank() >= 2) {
      QK_ASSIGN_OR_RETURN(std::vector<float> s, ConstFloats(*n, index + 1, "scale"));
      QK_ASSIGN_OR_RETURN(std::vector<int32_t> z, ConstInts(*n, index + 2, "zero point"));
      return DequantizedWeight(v, s, z, weight_axis < 0 ? v->initializer->rank() - 1 : weight_axis,
                               n);
    }
    return Dequantized(v, {n->input(index + 1), n->input(index + 2)}, n);
  }

  Status ConvertQLinearMatMul(ir::Node* n) {
    QK_RETURN_IF_NOT(n->num_inputs() == 8, StatusCode::kInvalidModel, "{}: expects 8 inputs",
                     n->Describe());
    QK_ASSIGN_OR_RETURN(ir::Value * a, MatMulOperand(n, 0, -1));
    QK_ASSIGN_OR_RETURN(ir::Value * b, MatMulOperand(n, 3, -1));
    ++report_.nodes_converted;
    return Replace(n, "MatMul", {a, b}, {}, QParams{n->input(6), n->input(7)}, n->output(0), {n});
  }

  // com.microsoft QGemm: Y = alpha * A' B' + C, C int32 with scale alpha * a_scale * b_scale.
  Status ConvertQGemm(ir::Node* n) {
    QK_RETURN_IF_NOT(n->num_inputs() >= 6, StatusCode::kInvalidModel, "{}: expects 6 to 9 inputs",
                     n->Describe());
    const float alpha = n->GetFloat("alpha", 1.0f);
    const int64_t trans_b = n->GetInt("transB", 0);
    QK_ASSIGN_OR_RETURN(std::vector<float> as, ConstFloats(*n, 1, "a_scale"));
    QK_ASSIGN_OR_RETURN(ir::Value * a, Dequantized(n->input(0), {n->input(1), n->input(2)}, n));
    QK_ASSIGN_OR_RETURN(ir::Value * b, MatMulOperand(n, 3, trans_b ? 0 : 1));
    QK_ASSIGN_OR_RETURN(std::vector<float> bs, ConstFloats(*n, 4, "b_scale"));
    std::vector<float> c_scale;
    for (float s : bs) c_scale.push_back(alpha * as.at(0) * s);
    QK_ASSIGN_OR_RETURN(ir::Value * c, FloatBias(n, 6, c_scale));
    std::vector<ir::Value*> inputs{a, b};
    if (c) inputs.push_back(c);
    std::optional<QParams> out;
    if (n->input(7)) out = QParams{n->input(7), n->input(8)};  // no y_scale: float output
    ++report_.nodes_converted;
    return Replace(n, "Gemm", inputs, CloneAttrs(*n), out, n->output(0), {n});
  }

  // QLinearAdd / QLinearMul (A, As, Az, B, Bs, Bz, Cs, Cz).
  Status ConvertBinary(ir::Node* n, const char* op) {
    QK_RETURN_IF_NOT(n->num_inputs() >= 7, StatusCode::kInvalidModel, "{}: expects 7 or 8 inputs",
                     n->Describe());
    QK_ASSIGN_OR_RETURN(ir::Value * a, Dequantized(n->input(0), {n->input(1), n->input(2)}, n));
    QK_ASSIGN_OR_RETURN(ir::Value * b, Dequantized(n->input(3), {n->input(4), n->input(5)}, n));
    ++report_.nodes_converted;
    return Replace(n, op, {a, b}, {}, QParams{n->input(6), n->input(7)}, n->output(0), {n});
  }

  // (X, Xs, Xz, Ys, Yz) ops.
  Status ConvertUnary(ir::Node* n, const char* op, const std::set<std::string>& skip_attrs) {
    QK_RETURN_IF_NOT(n->num_inputs() >= 4, StatusCode::kInvalidModel, "{}: expects 4 or 5 inputs",
                     n->Describe());
    QK_ASSIGN_OR_RETURN(ir::Value * x, Dequantized(n->input(0), {n->input(1), n->input(2)}, n));
    ++report_.nodes_converted;
    return Replace(n, op, {x}, CloneAttrs(*n, skip_attrs), QParams{n->input(3), n->input(4)},
                   n->output(0), {n});
  }

  Status ConvertPool(ir::Node* n) {
    QK_RETURN_IF_NOT(n->GetInt("channels_last", 0) == 0, StatusCode::kUnsupported,
                     "{}: channels_last=1 has no float ONNX equivalent without transposes",
                     n->Describe());
    const bool global = n->op_type() == "QLinearGlobalAveragePool";
    return ConvertUnary(n, global ? "GlobalAveragePool" : "AveragePool", {"channels_last"});
  }

  // QLinearSoftmax carries the opset whose Softmax semantics it follows; before 13 Softmax
  // flattens to 2-D at `axis`, which equals opset-13 Softmax only for the last axis.
  Status ConvertSoftmax(ir::Node* n) {
    const int64_t semantics = n->GetInt("opset", 13);
    const int64_t axis = n->GetInt("axis", semantics >= 13 ? -1 : 1);
    const ir::Value* x = n->input(0);
    const int64_t rank = x && x->type.has_shape ? static_cast<int64_t>(x->type.dims.size()) : -1;
    const bool last_axis = axis == -1 || (rank > 0 && axis == rank - 1);
    QK_RETURN_IF_NOT(semantics >= 13 || last_axis || model_.OpsetFor("") < 13,
                     StatusCode::kUnsupported,
                     "{}: opset-{} softmax over axis {} differs from the model's Softmax",
                     n->Describe(), semantics, axis);
    QK_RETURN_IF_ERROR(ConvertUnary(n, "Softmax", {"opset"}));
    return Status::Ok();
  }

  // QLinearConcat(Ys, Yz, X0, X0s, X0z, X1, ...).
  Status ConvertConcat(ir::Node* n) {
    QK_RETURN_IF_NOT(n->num_inputs() >= 5 && (n->num_inputs() - 2) % 3 == 0,
                     StatusCode::kInvalidModel,
                     "{}: expects Y_scale, Y_zero_point and "
                     "(X, scale, zero point) triples",
                     n->Describe());
    std::vector<ir::Value*> inputs;
    for (size_t i = 2; i + 2 < n->num_inputs(); i += 3) {
      QK_ASSIGN_OR_RETURN(ir::Value * x,
                          Dequantized(n->input(i), {n->input(i + 1), n->input(i + 2)}, n));
      inputs.push_back(x);
    }
    ++report_.nodes_converted;
    return Replace(n, "Concat", inputs, CloneAttrs(*n), QParams{n->input(0), n->input(1)},
                   n->output(0), {n});
  }

  // An op that moves integer elements: run it on the float tensor, re-quantize on the same grid.
  Status ConvertPassthrough(ir::Node* n) {
    ir::Value* xq = n->input(0);
    QK_RETURN_IF_NOT(xq && qparams_.count(xq), StatusCode::kUnsupported,
                     "{}: reads an integer tensor other than its data input", n->Describe());
    for (size_t i = 1; i < n->num_outputs(); ++i) {
      QK_RETURN_IF_NOT(!n->output(i) || n->output(i)->uses().empty(), StatusCode::kUnsupported,
                       "{}: output {} is used; only the data output is converted", n->Describe(),
                       i);
    }
    const QParams p = qparams_[xq];
    QK_ASSIGN_OR_RETURN(ir::Value * x, Dequantized(xq, p, n));
    std::vector<ir::Value*> inputs(n->inputs().begin(), n->inputs().end());
    inputs[0] = x;
    ++report_.passthrough_nodes;
    return Replace(n, n->op_type(), inputs, CloneAttrs(*n), p, n->output(0), {n});
  }

  // onnxruntime's integer-matmul pattern:
  //   yi = ConvInteger|MatMulInteger(xq, Wq, xz, wz); yf = Cast(yi, to=float); y = Mul(yf, S)
  // with S = Mul(x_scale, w_scale) (x dynamic) or a constant x_scale * w_scale (x static).
  Status ConvertIntegerPattern(ir::Node* n) {
    const bool conv = n->op_type() == "ConvInteger";
    auto fail = [&](const std::string& why) {
      return MakeStatus(StatusCode::kUnsupported,
                        "{}: {}; expected {} -> Cast(to=float) -> Mul(by x_scale * w_scale) as "
                        "onnxruntime.quantization writes it",
                        n->Describe(), why, n->op_type());
    };
    ir::Value* yi = n->output(0);
    if (!yi || yi->uses().size() != 1 || yi->is_graph_output())
      return fail("output has not exactly one use");
    ir::Node* cast = yi->uses()[0].node;
    if (!IsDefaultOp(cast, "Cast") || cast->GetInt("to", 0) != kOnnxFloat)
      return fail("output is not cast to float");
    ir::Value* yf = cast->output(0);
    if (yf->uses().size() != 1 || yf->is_graph_output())
      return fail("cast output has not exactly one use");
    ir::Node* mul = yf->uses()[0].node;
    if (!IsDefaultOp(mul, "Mul")) return fail("cast output is not multiplied by a scale");
    ir::Value* s = mul->input(0) == yf ? mul->input(1) : mul->input(0);
    ir::Value* xq = n->input(0);
    ir::Value* wq = n->input(1);
    if (!wq || !wq->is_constant()) return fail("the second operand is not a constant weight");
    ir::Node* xp = xq ? xq->producer() : nullptr;
    // w_scale: the constant operand of S = Mul(x_scale, w_scale), or S / x_scale.
    auto scale_operand = [&](const ir::Value* x_scale) -> const ir::Value* {
      const ir::Node* sm = s ? s->producer() : nullptr;
      if (!IsDefaultOp(sm, "Mul")) return nullptr;
      if (sm->input(0) == x_scale && sm->input(1) && sm->input(1)->is_constant())
        return sm->input(1);
      if (sm->input(1) == x_scale && sm->input(0) && sm->input(0)->is_constant())
        return sm->input(0);
      return nullptr;
    };
    auto floats_of = [](const ir::Value* v) {
      const ir::Tensor& t = *v->initializer;
      return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
    };
    std::vector<float> ws;
    ir::Value* x = nullptr;
    if (IsDefaultOp(xp, "DynamicQuantizeLinear")) {
      const ir::Value* w_scale = scale_operand(xp->output(1));
      if (!w_scale || w_scale->initializer->dtype() != ir::DType::kFloat) {
        return fail("the scale is not Mul(x_scale, constant w_scale)");
      }
      ws = floats_of(w_scale);
      x = xp->input(0);
      // Dynamic activations have no static scale: the plan marks them so (convert does).
      if (std::find(report_.dynamic_tensors.begin(), report_.dynamic_tensors.end(), x->name()) ==
          report_.dynamic_tensors.end()) {
        report_.dynamic_tensors.push_back(x->name());
      }
    } else if (IsDefaultOp(xp, "QuantizeLinear")) {
      QK_ASSIGN_OR_RETURN(std::vector<float> xs, ConstFloats(*xp, 1, "y_scale"));
      QK_ASSIGN_OR_RETURN(std::vector<int32_t> xz, ConstInts(*xp, 2, "y_zero_point"));
      QK_ASSIGN_OR_RETURN(std::vector<int32_t> xz_used, ConstInts(*n, 2, "x_zero_point"));
      QK_RETURN_IF_NOT(xz_used == xz, StatusCode::kInvalidModel,
                       "{}: x_zero_point {} differs from the zero point {} '{}' was quantized with",
                       n->Describe(), xz_used.at(0), xz.at(0), xq->name());
      if (const ir::Value* w_scale = scale_operand(xp->input(1))) {
        ws = floats_of(w_scale);
      } else if (s && s->is_constant() && s->initializer->dtype() == ir::DType::kFloat) {
        for (float v : floats_of(s)) ws.push_back(v / xs.at(0));
      } else {
        return fail("the scale is neither constant nor Mul(x_scale, w_scale)");
      }
      QK_ASSIGN_OR_RETURN(x, Dequantized(xq, {xp->input(1), xp->input(2)}, n));
    } else {
      return fail("its input '" + (xq ? xq->name() : std::string("?")) +
                  "' is not produced by DynamicQuantizeLinear or QuantizeLinear");
    }
    QK_ASSIGN_OR_RETURN(std::vector<int32_t> wz, ConstInts(*n, 3, "w_zero_point"));
    const int64_t axis = conv ? 0 : wq->initializer->rank() - 1;
    QK_ASSIGN_OR_RETURN(ir::Value * w, DequantizedWeight(wq, ws, wz, axis, n));
    ++report_.nodes_converted;
    return Replace(mul, conv ? "Conv" : "MatMul", {x, w}, CloneAttrs(*n), std::nullopt,
                   mul->output(0), {mul, cast, n});
  }

  // Nodes nothing reads any more (DynamicQuantizeLinear and scale Muls of converted patterns).
  void RemoveDeadNodes() {
    for (bool changed = true; changed;) {
      changed = false;
      for (ir::Node* n : g_.nodes()) {
        bool dead = true;
        for (const ir::Value* o : n->outputs()) {
          dead &= !o || (o->uses().empty() && !o->is_graph_output());
        }
        if (dead && g_.RemoveNode(n).ok()) changed = true;
      }
    }
  }

  ir::Model& model_;
  ir::Graph& g_;
  QopTally report_;
  std::unordered_map<const ir::Value*, QParams> qparams_;
  std::unordered_set<const ir::Node*> removed_;  // by this sweep: skipped, never dereferenced
};

// Element i of a numeric constant as double (int64 shapes, int/float values).
bool ReadAsDouble(const ir::Tensor& t, int64_t i, double* out) {
  switch (t.dtype()) {
    case ir::DType::kFloat:
      *out = t.data_as<float>()[i];
      return true;
    case ir::DType::kInt64:
      *out = static_cast<double>(t.data_as<int64_t>()[i]);
      return true;
    case ir::DType::kInt32:
      *out = t.data_as<int32_t>()[i];
      return true;
    case ir::DType::kInt8:
      *out = t.data_as<int8_t>()[i];
      return true;
    case ir::DType::kUint8:
      *out = t.data_as<uint8_t>()[i];
      return true;
    default:
      return false;
  }
}

bool WriteFromDouble(ir::Tensor* t, int64_t i, double v) {
  switch (t->dtype()) {
    case ir::DType::kFloat:
      t->mutable_data_as<float>()[i] = static_cast<float>(v);
      return true;
    case ir::DType::kInt64:
      t->mutable_data_as<int64_t>()[i] = static_cast<int64_t>(v);
      return true;
    case ir::DType::kInt32:
      t->mutable_data_as<int32_t>()[i] = static_cast<int32_t>(v);
      return true;
    case ir::DType::kInt8:
      t->mutable_data_as<int8_t>()[i] = static_cast<int8_t>(v);
      return true;
    case ir::DType::kUint8:
      t->mutable_data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
      return true;
    default:
      return false;
  }
}

// Folding exists for the scalars, zero points and biases of PyTorch exports. A ConstantOfShape
// declaring 10^9 elements in a few bytes would otherwise allocate gigabytes here (and write them
// into the output): anything larger than this stays a node.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;

// ConstantOfShape(constant shape) or Cast(constant) -> the constant it computes, or nothing.
std::optional<ir::Tensor> FoldConstant(const ir::Node& n) {
  const ir::Value* in = n.input(0);
  if (!in || !in->is_constant() || n.num_outputs() != 1) return std::nullopt;
  const ir::Tensor& src = *in->initializer;
  if (n.op_type() == "ConstantOfShape") {
    if (src.dtype() != ir::DType::kInt64) return std::nullopt;
    std::vector<int64_t> dims(src.data_as<int64_t>(), src.data_as<int64_t>() + src.numel());
    int64_t numel = 1;
    for (int64_t d : dims) {
      // Checked one dim at a time so the product can neither overflow nor pass the cap.
      if (d < 0 || d > kMaxFoldedElements) return std::nullopt;
      numel *= d;
      if (numel > kMaxFoldedElements) return std::nullopt;
    }
    const ir::Attribute* value = n.attr("value");
    ir::Tensor out(value ? value->t.dtype() : ir::DType::kFloat, dims);
    double v = 0.0;
    if (value && (value->t.numel() != 1 || !ReadAsDouble(value->t, 0, &v))) return std::nullopt;
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (!WriteFromDouble(&out, i, v)) return std::nullopt;
    }
    return out;
  }
  if (n.op_type() == "Cast") {
    if (src.numel() > kMaxFoldedElements) return std::nullopt;
    ir::Tensor out(static_cast<ir::DType>(n.GetInt("to", 0)), src.dims());
    for (int64_t i = 0; i < src.numel(); ++i) {
      double v = 0.0;
      if (!ReadAsDouble(src, i, &v) || !WriteFromDouble(&out, i, v)) return std::nullopt;
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

Status NormalizeTorchQdq::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& g = *model.graph;
  int64_t removed = 0;
  bool rewired = false;  // a [1] scale / zero point replaced by its rank-0 copy
  QK_RETURN_IF_ERROR(g.SortTopologically());
  for (ir::Node* n : g.nodes()) {
    if (!n->domain().empty() || n->output(0) == nullptr || n->output(0)->is_graph_output())
      continue;
    if (n->op_type() == "ConstantOfShape" || n->op_type() == "Cast") {
      if (std::optional<ir::Tensor> t = FoldConstant(*n)) {
        ir::Value* out = n->output(0);
        const std::string name = out->name();
        ir::Value* c = g.AddInitializer(g.UniqueValueName(name + "_folded"), std::move(*t));
        g.ReplaceAllUsesWith(out, c);
        QK_RETURN_IF_ERROR(g.RemoveNode(n));
        QK_RETURN_IF_ERROR(g.RenameValue(c, name));
        c->initializer->name = name;
        ++removed;
        continue;
      }
    }
    // Q/DQ without `axis` whose scale / zero point has shape [1]: per tensor for onnxruntime,
    // but a 1-D scale reads as per-axis (default axis 1) elsewhere; use rank-0 copies.
    if ((n->op_type() == "DequantizeLinear" || n->op_type() == "QuantizeLinear") &&
        !n->has_attr("axis")) {
      for (size_t i = 1; i < 3 && i < n->num_inputs(); ++i) {
        ir::Value* v = n->input(i);
        if (!v || !v->is_constant() || v->initializer->rank() != 1 || v->initializer->numel() != 1)
          continue;
        ir::Tensor scalar(v->initializer->dtype(), {});
        std::memcpy(scalar.mutable_data(), v->initializer->data(), scalar.nbytes());
        g.SetNodeInput(
            n, i, g.AddInitializer(g.UniqueValueName(v->name() + "_scalar"), std::move(scalar)));
        rewired = true;
      }
    }
    // Q -> Cast(to = Q's dtype): the Cast changes nothing.
    if (n->op_type() == "Cast" &&
        IsDefaultOp(n->input(0) ? n->input(0)->producer() : nullptr, "QuantizeLinear")) {
      const ir::Node* q = n->input(0)->producer();
      const ir::Value* zp = q->input(2);
      const ir::DType q_dtype =
          zp && zp->initializer ? zp->initializer->dtype() : ir::DType::kUint8;
      if (zp && !zp->initializer) continue;
      if (static_cast<ir::DType>(n->GetInt("to", 0)) != q_dtype) continue;
      QK_RETURN_IF_ERROR(g.RemoveNodeAndReconnect(n, 0, 0));
      ++removed;
    }
  }
  const int unused = RemoveUnusedInitializers(g);
  report->Add(counter::kFolded, removed);
  report->changed = removed > 0 || rewired || unused > 0;
  if (removed > 0) {
    report->summary =
        fmt::format("folded {} no-op Casts / constant zero points of a PyTorch export", removed);
  }
  return Status::Ok();
}

bool HasIntegerOps(const ir::Graph& graph) {
  for (const ir::Node* n : graph.nodes()) {
    if (IsIntegerOp(*n)) return true;
  }
  return false;
}

Status QOperatorToQdq::Run(ir::Model& model, PassReport* report) const {
  QK_ASSIGN_OR_RETURN(QopTally tally, Rewriter(model).Run());
  report->Add(counter::kNodesConverted, tally.nodes_converted);
  report->Add(counter::kPassthroughNodes, tally.passthrough_nodes);
  report->Add(counter::kRelusRestored, tally.relus_restored);
  report->lists[std::string(list::kDynamicTensors)] = std::move(tally.dynamic_tensors);
  report->notes = std::move(tally.notes);
  report->changed = tally.nodes_converted + tally.passthrough_nodes > 0;
  report->summary = fmt::format(
      "integer-operator model: {} integer ops and {} shape ops on integer tensors rewritten "
      "to float ops with Q/DQ; {} Relus restored (fused into an output range starting at 0)",
      tally.nodes_converted, tally.passthrough_nodes, tally.relus_restored);
  return Status::Ok();
}

}  // namespace quantkit::passes
