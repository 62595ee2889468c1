#include "runtime/float_precision.h"

#include <set>
#include <string>

#include "runtime/trt_fusions.h"

namespace quantkit::runtime {
namespace {

bool IsOnnx(const ir::Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }
bool IsSimulationOp(const ir::Node& n, const char* op) {
  return n.domain() == "com.quantkit" && n.op_type() == op;
}

// Ops whose results copy or select input values (exact in any float type): no rounding needed.
const std::set<std::string>& ExactOps() {
  static const std::set<std::string> ops{"Identity",
                                         "Reshape",
                                         "Flatten",
                                         "Squeeze",
                                         "Unsqueeze",
                                         "Transpose",
                                         "Concat",
                                         "Split",
                                         "Slice",
                                         "Gather",
                                         "GatherElements",
                                         "GatherND",
                                         "Expand",
                                         "Tile",
                                         "DepthToSpace",
                                         "SpaceToDepth",
                                         "MaxPool",
                                         "GlobalMaxPool",
                                         "Relu",
                                         "Max",
                                         "Min",
                                         "Neg",
                                         "Abs",
                                         "ReduceMax",
                                         "ReduceMin",
                                         "Where",
                                         "Compress",
                                         "Dropout",
                                         "ReverseSequence",
                                         "Trilu"};
  return ops;
}

bool IsFloatingType(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

}  // namespace

StepPrecision PlanStepPrecision(const ir::Node& node) {
  StepPrecision p;
  const std::string& op = node.op_type();
  p.keep_fp32.assign(node.num_outputs(), false);
  if (IsOnnx(node)) {
    if (op == "If" || op == "Loop" || op == "Scan" || op == "Shape" || op == "Size") {
      p.role = StepPrecision::Role::kPassThrough;
      return p;
    }
    if (ExactOps().count(op)) p.role = StepPrecision::Role::kExact;
    if (op == "Cast" || node.has_attr("dtype") || node.has_attr("output_dtype") ||
        node.has_attr("output_datatype")) {
      p.type_from = StepPrecision::TypeFrom::kKernel;
    } else if (op == "CastLike" || op == "DequantizeLinear") {
      p.type_from = StepPrecision::TypeFrom::kInput;
      p.type_input = 1;
    } else if (op == "LayerNormalization") {
      p.typed_outputs = 1;
    }
  } else if (IsSimulationOp(node, "FakeQuantizeLinear")) {
    p.type_from = StepPrecision::TypeFrom::kInput;  // DequantizeLinear's: the scale's type
    p.type_input = 1;
  }
  // The two TensorRT fusions of trt_fusions.h.
  const bool dequantize =
      (IsOnnx(node) && op == "DequantizeLinear") || IsSimulationOp(node, "FakeQuantizeLinear");
  if (!p.keep_fp32.empty() && ((dequantize && FusedIntoInt8Layers(node.output(0))) ||
                               (IsInt8Layer(node) && RequantizedInEpilogue(node.output(0))))) {
    p.keep_fp32[0] = true;
  }
  // T's type: a non-constant input first, so that a weight folded to float32 by the simulation
  // (passes/fold_weight_qdq.h) cannot decide it.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      const ir::Value* v = node.input(i);
      if (v != nullptr && (v->is_constant() == (pass == 1)))
        p.type_order.push_back(static_cast<int>(i));
    }
  }
  return p;
}

at::ScalarType PrepareInputs(const StepPrecision& p, std::vector<at::Tensor>& inputs,
                             const std::vector<at::ScalarType>& logical) {
  if (p.role == StepPrecision::Role::kPassThrough) return at::ScalarType::Undefined;
  at::ScalarType type16 = at::ScalarType::Undefined;
  if (p.type_from == StepPrecision::TypeFrom::kInput) {
    const size_t i = static_cast<size_t>(p.type_input);
    if (i < inputs.size() && inputs[i].defined()) type16 = Logical16(inputs[i], logical[i]);
  } else if (p.type_from == StepPrecision::TypeFrom::kFirstFloatInput) {
    for (int index : p.type_order) {
      const size_t i = static_cast<size_t>(index);
      if (i >= inputs.size() || !inputs[i].defined()) continue;
      const at::ScalarType l16 = Logical16(inputs[i], logical[i]);
      if (l16 != at::ScalarType::Undefined || IsFloatingType(inputs[i].scalar_type())) {
        type16 = l16;
        break;
      }
    }
  }
  for (at::Tensor& t : inputs) {
    if (t.defined() && Is16BitFloat(t.scalar_type())) t = t.to(at::kFloat);
  }
  return type16;
}

at::ScalarType FinishOutput(const StepPrecision& p, size_t j, at::ScalarType type16,
                            at::Tensor& out) {
  if (type16 == at::ScalarType::Undefined || !out.defined() || out.scalar_type() != at::kFloat ||
      static_cast<int>(j) >= p.typed_outputs) {
    return at::ScalarType::Undefined;
  }
  if (p.role == StepPrecision::Role::kCompute && !(j < p.keep_fp32.size() && p.keep_fp32[j])) {
    out = out.to(type16).to(at::kFloat);
  }
  return type16;
}

at::Tensor Materialize(const at::Tensor& t, at::ScalarType logical) {
  if (logical == at::ScalarType::Undefined || !t.defined() || t.scalar_type() != at::kFloat)
    return t;
  return t.to(logical);
}

}  // namespace quantkit::runtime
