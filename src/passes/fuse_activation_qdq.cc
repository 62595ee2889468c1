#include "passes/fuse_activation_qdq.h"

#include <initializer_list>
#include <string>
#include <vector>

#include "common/check.h"

namespace quantkit::passes {
namespace {

bool IsOnnxOp(const ir::Node* n, const char* op) {
  return n != nullptr && n->domain().empty() && n->op_type() == op;
}

// A constant scalar of one of `types`, or nullptr.
const ir::Tensor* ScalarConstant(const ir::Value* v, std::initializer_list<ir::DType> types) {
  if (v == nullptr || !v->is_constant() || !v->initializer || v->initializer->numel() != 1)
    return nullptr;
  for (ir::DType t : types) {
    if (v->initializer->dtype() == t) return &*v->initializer;
  }
  return nullptr;
}

// The same constant on both nodes: one value, or two initializers with equal bytes.
bool SameConstant(const ir::Tensor* a, const ir::Tensor* b) {
  return a && b && a->ContentEquals(*b);
}

bool OnlyAxisAttribute(const ir::Node* n) {
  for (const ir::Attribute& a : n->attributes()) {
    if (a.name != "axis") return false;
  }
  return true;
}

bool Fusable(const ir::Node* q, const ir::Node* dq) {
  const ir::Value* quantized = q->output(0);
  if (quantized == nullptr || quantized->uses().size() != 1 || quantized->is_graph_output())
    return false;
  if (q->input(0) == nullptr || q->input(0)->is_constant()) return false;
  if (!OnlyAxisAttribute(q) || !OnlyAxisAttribute(dq) || dq->input(0) != quantized) return false;
  // float32, or float16 / bfloat16 in an FP16 model (the kernel computes in float32 either way:
  // runtime/float_precision.h).
  const std::initializer_list<ir::DType> float_types = {ir::DType::kFloat, ir::DType::kFloat16,
                                                        ir::DType::kBFloat16};
  const ir::Tensor* scale = ScalarConstant(q->input(1), float_types);
  if (!SameConstant(scale, ScalarConstant(dq->input(1), float_types))) return false;
  const bool q_zp = q->input(2) != nullptr, dq_zp = dq->input(2) != nullptr;
  if (!q_zp && !dq_zp) return true;  // uint8, zero point 0
  const std::initializer_list<ir::DType> eight_bit = {ir::DType::kInt8, ir::DType::kUint8};
  return q_zp && dq_zp &&
         SameConstant(ScalarConstant(q->input(2), eight_bit),
                      ScalarConstant(dq->input(2), eight_bit));
}

}  // namespace

Status FuseActivationQdq::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& graph = *model.graph;
  std::vector<std::pair<ir::Node*, ir::Node*>> pairs;
  for (ir::Node* dq : graph.nodes()) {
    if (!IsOnnxOp(dq, "DequantizeLinear") || dq->input(0) == nullptr) continue;
    ir::Node* q = dq->input(0)->producer();
    if (IsOnnxOp(q, "QuantizeLinear") && Fusable(q, dq)) pairs.push_back({q, dq});
  }
  report->Add(counter::kActivationPairs, static_cast<int64_t>(pairs.size()));
  if (pairs.empty()) return Status::Ok();
  model.SetOpset(kSimulationDomain, 1);
  for (const auto& [q, dq] : pairs) {
    std::vector<ir::Value*> inputs{q->input(0), q->input(1)};
    if (q->input(2) != nullptr) inputs.push_back(q->input(2));
    ir::Value* out = dq->output(0);
    const std::string out_name = out->name();
    QK_ASSIGN_OR_RETURN(ir::Node * fq,
                        graph.InsertNodeBefore(dq, "FakeQuantizeLinear", inputs,
                                               {graph.UniqueValueName(out_name + "_fq")},
                                               kSimulationDomain, dq->name + "_fq"));
    graph.ReplaceAllUsesWith(out, fq->output(0));
    QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
    QK_RETURN_IF_ERROR(graph.RemoveNode(q));
    QK_RETURN_IF_ERROR(graph.RenameValue(fq->output(0), out_name));
  }
  report->changed = true;
  return Status::Ok();
}

}  // namespace quantkit::passes
