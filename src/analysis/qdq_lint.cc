#include "analysis/qdq_lint.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include "analysis/model_loading.h"
#include "analysis/typed_lint.h"
#include "common/check.h"
#include "common/text.h"
#include "ir/float16.h"
#include "passes/placement_rules.h"
#include "passes/qdq_pairs.h"
#include "runtime/interpreter.h"

namespace quantkit::analysis {
namespace {

// Ops TensorRT can run in INT8 (or that move INT8 data) when fed by DequantizeLinear.
const std::set<std::string>& Int8CapableOps() {
  static const std::set<std::string> ops{
      "Conv",          "ConvTranspose", "Gemm",    "MatMul",      "Add",
      "Mul",           "Concat",        "MaxPool", "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "Relu",          "Clip",    "LeakyRelu",   "Reshape",
      "Transpose",     "Flatten",       "Squeeze", "Unsqueeze",   "Identity",
      "Slice",         "Split",         "Pad",     "Resize",      "QuantizeLinear",
      "Gather",        "Expand",        "Tile",    "ReduceMean"};
  return ops;
}

const char* kMinOpsetFix = "convert the model to a newer opset (quantkit convert --opset N)";

class Linter {
 public:
  explicit Linter(const ir::Model& model) : model_(model) {
    // Depth and order decide which Conv of a projection-shortcut Add is the backbone (R3 of
    // passes/qdq_placement.h); a cyclic graph leaves them empty (the order then decides nothing).
    Result<std::vector<ir::Node*>> order = model.graph->TopologicalOrder();
    if (order.ok()) {
      depth_ = passes::NodeDepths(order.value());
      for (size_t i = 0; i < order.value().size(); ++i) position_[order.value()[i]] = i;
    }
  }

  LintReport Run() {
    for (const ir::Node* n : model_.graph->nodes()) {
      if (!n->domain().empty()) continue;
      if (n->op_type() == "QuantizeLinear" || n->op_type() == "DequantizeLinear") CheckParams(*n);
    }
    for (const passes::QdqUnit& u : passes::FindQdqUnits(*model_.graph)) {
      if (u.q && !u.dq_params_match) {
        Add("QK008", Severity::kWarning, *u.dq,
            fmt::format("DequantizeLinear '{}' does not use the scale/zero point of QuantizeLinear "
                        "'{}'",
                        u.dq->name, u.q->name),
            "TensorRT treats them as two separate scales and requantizes in between",
            "give the pair the same scale and zero-point initializers");
      }
    }
    for (const ir::Node* n : model_.graph->nodes()) {
      if (!n->domain().empty()) continue;
      CheckPlacement(*n);
    }
    return std::move(report_);
  }

 private:
  void Add(const char* rule, Severity sev, const ir::Node& n, std::string message, std::string why,
           std::string fix) {
    report_.findings.push_back(LintFinding{rule, sev, n.name, n.op_type(), std::move(message),
                                           std::move(why), std::move(fix)});
  }

  static bool IsDqOutput(const ir::Value* v) {
    return v && v->producer() && v->producer()->domain().empty() &&
           v->producer()->op_type() == "DequantizeLinear";
  }
  // The float tensor a DQ output stands for: the input of the Q feeding the DQ, if any.
  static const ir::Value* QuantizedSource(const ir::Value* dq_out) {
    const ir::Node* dq = dq_out->producer();
    const ir::Value* q_out = dq->input(0);
    if (q_out && q_out->producer() && q_out->producer()->op_type() == "QuantizeLinear") {
      return q_out->producer()->input(0);
    }
    return nullptr;
  }
  static std::vector<float> ScaleOf(const ir::Value* dq_out) {
    const ir::Value* s = dq_out->producer()->input(1);
    std::vector<float> values;
    if (!s || !s->initializer || !ir::ReadFloatValues(*s->initializer, &values)) return {};
    return values;
  }

  void CheckParams(const ir::Node& n) {
    const bool is_q = n.op_type() == "QuantizeLinear";
    report_.num_q += is_q ? 1 : 0;
    report_.num_dq += is_q ? 0 : 1;
    const int64_t opset = model_.OpsetFor("");
    const ir::Value* scale = n.input(1);
    const ir::Value* zp = n.input(2);
    if (!scale || !scale->initializer || (zp && !zp->initializer)) {
      Add("QK004", Severity::kError, n, "scale or zero point is not a constant initializer",
          "TensorRT needs build-time constant Q/DQ parameters",
          "fold the computation that produces them (or run PromoteConstants on Constant nodes)");
    }
    // Zero-point dtype and values.
    ir::DType qtype = zp && zp->initializer ? zp->initializer->dtype() : ir::DType::kUint8;
    if (!is_q && n.input(0) && n.input(0)->type.is_tensor() &&
        n.input(0)->type.dtype != ir::DType::kUndefined) {
      qtype = n.input(0)->type.dtype;
    }
    if (!zp && is_q && !n.has_attr("output_dtype")) qtype = ir::DType::kUint8;
    if (qtype == ir::DType::kInt32 || qtype == ir::DType::kInt16 || qtype == ir::DType::kUint16) {
      Add("QK002", Severity::kError, n, fmt::format("quantizes to {}", ir::DTypeName(qtype)),
          "TensorRT's Q/DQ layers support INT8, FP8 and INT4 only (an int32 DQ is usually a "
          "quantized bias)",
          "keep biases in float; TensorRT picks their precision itself");
    }
    if (qtype == ir::DType::kUint8) {
      Add("QK002", Severity::kError, n,
          fmt::format("quantizes to uint8{}",
                      zp ? "" : " (no zero point given: ONNX defaults to uint8)"),
          "TensorRT has no UINT8 quantization; its ONNX parser rejects uint8 Q/DQ",
          "use an int8 zero-point initializer of value 0 (symmetric int8)");
    }
    if (zp && zp->initializer) {
      const ir::Tensor& z = *zp->initializer;
      bool nonzero = false;
      for (size_t i = 0; i < z.nbytes(); ++i)
        nonzero |= static_cast<const uint8_t*>(z.data())[i] != 0;
      if (nonzero) {
        Add("QK001", Severity::kError, n,
            fmt::format("zero point '{}' is not all zeros", zp->name()),
            "TensorRT supports symmetric quantization only (\"TensorRT only supports symmetric "
            "quantization\")",
            "recalibrate symmetrically, or let quantkit convert the range: quantkit convert "
            "MODEL out.onnx");
      }
      if (ir::IsFloating(z.dtype()) && opset < 19) {
        Add("QK007", Severity::kError, n,
            fmt::format("float8 Q/DQ needs opset 19, model has {}", opset),
            "older opsets do not define float8 QuantizeLinear", kMinOpsetFix);
      }
      if ((z.dtype() == ir::DType::kInt4 || z.dtype() == ir::DType::kUint4) && opset < 21) {
        Add("QK007", Severity::kError, n,
            fmt::format("int4 Q/DQ needs opset 21, model has {}", opset),
            "older opsets do not define int4 QuantizeLinear", kMinOpsetFix);
      }
    }
    if (n.GetInt("block_size", 0) > 0 && opset < 21) {
      Add("QK007", Severity::kError, n,
          fmt::format("blocked quantization needs opset 21, model has {}", opset),
          "older opsets have no block_size attribute", kMinOpsetFix);
    }
    if (!scale || !scale->initializer) return;
    const ir::Tensor& s = *scale->initializer;
    // float32, float16 or bfloat16 scales (an FP16 model's Q/DQ: opset 19+).
    if (std::vector<float> values; ir::ReadFloatValues(s, &values)) {
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = values[i];
        if (!(v > 0.0f) || !std::isfinite(v)) {
          Add("QK003", Severity::kError, n,
              fmt::format("scale '{}'[{}] = {} is not finite and positive", scale->name(), i, v),
              "TensorRT requires \"Scale coefficients must all be positive\"",
              "recalibrate that tensor; a constant tensor should be kept in float");
          break;
        }
      }
    }
    const bool per_channel = s.rank() == 1 && s.numel() > 1;
    if (!per_channel) return;
    if (opset < 13) {
      Add("QK007", Severity::kError, n,
          fmt::format("per-channel scale '{}' needs opset 13, model has {}", scale->name(), opset),
          "opsets 10-12 define per-tensor Q/DQ only", kMinOpsetFix);
    }
    if (!n.has_attr("axis")) {
      Add("QK006", Severity::kError, n,
          fmt::format("per-channel scale '{}' without an explicit axis", scale->name()),
          "TensorRT's parser then assumes axis 0 (KCRS weights) while ONNX means axis 1",
          "write the axis attribute explicitly (0 for Conv weights, 1 for ConvTranspose)");
    }
    const ir::Value* data = n.input(0);
    const ir::Value* source =
        is_q ? data : (data && data->producer() ? data->producer()->input(0) : data);
    if (source && !source->is_constant() && !(data && data->is_constant())) {
      Add("QK005", Severity::kError, n,
          fmt::format("per-channel quantization of activation '{}'", source->name()),
          "TensorRT supports per-channel scales for weights only (\"Activations cannot be "
          "quantized per-channel\")",
          "use a per-tensor scale (e.g. the maximum of the channel scales)");
    }
  }

  void CheckPlacement(const ir::Node& n) {
    const std::string& op = n.op_type();
    if (op == "Add" && n.num_inputs() == 2 && IsDqOutput(n.input(0)) && IsDqOutput(n.input(1))) {
      const auto s0 = ScaleOf(n.input(0));
      const auto s1 = ScaleOf(n.input(1));
      if (!s0.empty() && !s1.empty() && s0 != s1) {
        Add("QK009", Severity::kWarning, n, "both Add inputs are quantized, with different scales",
            "TensorRT cannot fuse the residual Add into the producing Conv and runs it with an "
            "extra requantization",
            "quantize only the skip branch (quantkit places Q/DQ that way)");
      }
    }
    if (op == "Add") {
      for (size_t i = 0; i < n.num_inputs(); ++i) {
        const ir::Value* in = n.input(i);
        if (!IsDqOutput(in)) continue;
        const ir::Value* src = QuantizedSource(in);
        // With a projection shortcut both inputs come from Convs: only the backbone's output
        // must stay float; quantizing the shortcut Conv's output is TensorRT's recipe.
        const ir::Node* other = n.num_inputs() == 2 ? ConvBehind(n.input(1 - i)) : nullptr;
        const ir::Node* conv = ConvBehind(in);
        if (conv && other && !passes::IsResidualBackbone(conv, other, depth_, position_)) continue;
        if (src && src->producer() && src->producer()->op_type() == "Conv") {
          Add("QK009", Severity::kWarning, n,
              fmt::format("input '{}' quantizes the output of Conv '{}'", in->name(),
                          src->producer()->name),
              "a Q/DQ between a Conv and its residual Add blocks the Conv+Add fusion",
              "remove that Q/DQ pair and quantize the other (skip) input instead");
        }
      }
    }
    if (op == "Concat") {
      std::vector<float> first;
      bool all_dq = n.num_inputs() > 1;
      bool differ = false;
      for (const ir::Value* in : n.inputs()) {
        if (!IsDqOutput(in)) {
          all_dq = false;
          break;
        }
        const auto s = ScaleOf(in);
        if (first.empty()) first = s;
        differ |= s != first;
      }
      if (all_dq && differ) {
        Add("QK010", Severity::kWarning, n, "Concat inputs are quantized with different scales",
            "TensorRT must requantize the inputs to one scale (or fall back to higher precision)",
            "use one scale for every input of the Concat");
      }
    }
    if (op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul") {
      const ir::Value* x = n.input(0);
      const ir::Value* w = n.input(1);
      const bool x_q = IsDqOutput(x);
      const bool w_const_float = w && w->is_constant();
      const bool w_q = IsDqOutput(w);
      if (x_q && w_const_float) {
        Add("QK012", Severity::kWarning, n,
            fmt::format("input '{}' is quantized but weight '{}' is not", x->name(), w->name()),
            "TensorRT runs the layer in higher precision",
            "add a per-channel Q/DQ pair on the weight");
      } else if (w_q && x && !x_q && !x->is_constant()) {
        Add("QK012", Severity::kWarning, n,
            fmt::format("weight '{}' is quantized but input '{}' is not", w->name(), x->name()),
            "TensorRT runs the layer in higher precision", "add a Q/DQ pair on the input");
      }
    }
    if (!Int8CapableOps().count(op)) {
      for (const ir::Value* in : n.inputs()) {
        if (IsDqOutput(in)) {
          Add("QK011", Severity::kInfo, n,
              fmt::format("DequantizeLinear output '{}' feeds {}", in->name(), op),
              "TensorRT has no INT8 implementation for it: it runs in higher precision",
              "nothing to fix if intended; otherwise drop the Q/DQ before it");
          break;
        }
      }
    }
  }

  // The Conv producing an Add input, directly or behind one Q/DQ pair; nullptr otherwise.
  static const ir::Node* ConvBehind(const ir::Value* in) {
    const ir::Value* src = IsDqOutput(in) ? QuantizedSource(in) : in;
    if (!src || !src->producer() || src->producer()->op_type() != "Conv") return nullptr;
    return src->producer();
  }

  const ir::Model& model_;
  LintReport report_;
  std::unordered_map<const ir::Node*, int> depth_;
  std::unordered_map<const ir::Node*, size_t> position_;
};

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "?";
}

Severity LintReport::Worst() const {
  Severity worst = Severity::kInfo;
  for (const LintFinding& f : findings) worst = std::max(worst, f.severity);
  return worst;
}

int LintReport::Count(Severity s) const {
  int n = 0;
  for (const LintFinding& f : findings) n += f.severity == s ? 1 : 0;
  return n;
}

LintReport LintQdqModel(const ir::Model& model) {
  LintReport report = Linter(model).Run();
  LintStronglyTyped(model, &report.findings);  // QK015-QK020 (analysis/typed_lint.h)
  if (report.num_q + report.num_dq == 0) {
    report.findings.push_back(LintFinding{
        "QK013", Severity::kWarning, model.graph->name, "Graph",
        "the model has no QuantizeLinear or DequantizeLinear node: nothing to lint",
        "TensorRT builds a float model in FP32/FP16; lint checks explicit (Q/DQ) quantization",
        "lint the Q/DQ model that quantkit calibrate writes (OUT/model.qdq.onnx)"});
  }
  return report;
}

namespace {

// Zero inputs of the declared shapes (a symbolic leading dim becomes 1), or nothing when a shape
// is not fully known or the inputs would be large: the dry run is then skipped.
std::optional<std::vector<runtime::NamedTensor>> DryRunInputs(const ir::Graph& graph) {
  constexpr int64_t kMaxDryRunElements = int64_t{1} << 24;
  std::vector<runtime::NamedTensor> feeds;
  for (const ir::Value* v : graph.inputs()) {
    if (v->is_initializer()) continue;
    const ir::TypeInfo& type = v->type;
    if (!type.is_tensor() || !type.has_shape || type.dtype == ir::DType::kUndefined ||
        type.dtype == ir::DType::kString) {
      return std::nullopt;
    }
    std::vector<int64_t> dims;
    int64_t numel = 1;
    for (size_t i = 0; i < type.dims.size(); ++i) {
      if (!type.dims[i].is_known() && i != 0) return std::nullopt;  // e.g. dynamic image size
      dims.push_back(type.dims[i].is_known() ? type.dims[i].value : 1);
      numel *= std::max<int64_t>(dims.back(), 1);
      if (numel > kMaxDryRunElements) return std::nullopt;
    }
    feeds.push_back({v->name(), ir::Tensor(type.dtype, dims)});
  }
  return feeds;
}

}  // namespace

Result<LintReport> LintModelFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model loaded, LoadModelForQuantization(path));
  auto model = std::make_shared<const ir::Model>(std::move(loaded));
  // Building the kernels validates every node's attributes; one run on zero inputs (when every
  // input shape is declared) finds what only shapes reveal, such as an impossible Reshape.
  Result<std::unique_ptr<runtime::Interpreter>> runnable = runtime::Interpreter::Create(model);
  if (runnable.ok()) {
    if (std::optional<std::vector<runtime::NamedTensor>> feeds = DryRunInputs(*model->graph)) {
      Result<std::vector<runtime::NamedTensor>> ran = runnable.value()->Run(*feeds);
      if (!ran.ok()) runnable = ran.status();
    }
  }
  std::string unsupported;
  if (!runnable.ok()) {
    const Status& st = runnable.status();
    QK_RETURN_IF_NOT(st.code() != StatusCode::kResourceExhausted, StatusCode::kResourceExhausted,
                     "{}: the model cannot run: {}", path, st.message());
    QK_RETURN_IF_NOT(st.code() == StatusCode::kUnsupported, StatusCode::kInvalidModel,
                     "{}: the model is invalid, it cannot run: {}", path, st.message());
    unsupported = st.message();
  }
  LintReport report = LintQdqModel(*model);
  if (!unsupported.empty()) {
    report.findings.push_back(
        LintFinding{"QK014", Severity::kInfo, model->graph->name, "Graph", unsupported,
                    "quantkit's runtime lacks this op, so it could not build the model",
                    "none needed if TensorRT has the op (a plugin)"});
  }
  return report;
}

std::string FormatLintText(const LintReport& report) {
  std::string out;
  for (const LintFinding& f : report.findings) {
    // Node names and messages come from the model: escaped so they cannot drive the terminal.
    out += fmt::format("{} {} node '{}' ({}): {}. Why: {}. Fix: {}.\n", SeverityName(f.severity),
                       f.rule, EscapeControl(f.node), EscapeControl(f.op_type),
                       EscapeControl(f.message), f.why, f.fix);
  }
  out += fmt::format("{} QuantizeLinear, {} DequantizeLinear: {} errors, {} warnings, {} notes\n",
                     report.num_q, report.num_dq, report.Count(Severity::kError),
                     report.Count(Severity::kWarning), report.Count(Severity::kInfo));
  return out;
}

std::string FormatLintJson(const LintReport& report) {
  nlohmann::json findings = nlohmann::json::array();
  for (const LintFinding& f : report.findings) {
    findings.push_back({{"rule", f.rule},
                        {"severity", SeverityName(f.severity)},
                        {"node", f.node},
                        {"op_type", f.op_type},
                        {"message", f.message},
                        {"why", f.why},
                        {"fix", f.fix}});
  }
  nlohmann::json j{{"summary",
                    {{"quantize_linear", report.num_q},
                     {"dequantize_linear", report.num_dq},
                     {"errors", report.Count(Severity::kError)},
                     {"warnings", report.Count(Severity::kWarning)},
                     {"notes", report.Count(Severity::kInfo)},
                     {"worst", SeverityName(report.Worst())}}},
                   {"findings", findings}};
  return j.dump(1) + "\n";
}

}  // namespace quantkit::analysis
