#include "passes/qdq_pairs.h"

#include <cstring>

#include "ir/float16.h"

namespace quantkit::passes {
namespace {

bool IsOp(const ir::Node* n, const char* op) {
  return n && n->domain().empty() && n->op_type() == op;
}

// Scales are float32, float16 or bfloat16 (opset 19+ Q/DQ in an FP16 model; exact in float32).
bool ReadFloats(const ir::Value* v, std::vector<float>* out) {
  return v && v->initializer && ir::ReadFloatValues(*v->initializer, out);
}

bool ReadZeroPoints(const ir::Value* v, std::vector<int32_t>* out, ir::DType* dtype) {
  if (!v) return true;  // absent: zero, uint8 (ONNX default)
  if (!v->initializer) return false;
  const ir::Tensor& t = *v->initializer;
  *dtype = t.dtype();
  out->clear();
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case ir::DType::kInt8:
        out->push_back(t.data_as<int8_t>()[i]);
        break;
      case ir::DType::kUint8:
        out->push_back(t.data_as<uint8_t>()[i]);
        break;
      case ir::DType::kInt16:
        out->push_back(t.data_as<int16_t>()[i]);
        break;
      case ir::DType::kUint16:
        out->push_back(t.data_as<uint16_t>()[i]);
        break;
      case ir::DType::kInt32:
        out->push_back(t.data_as<int32_t>()[i]);
        break;  // quantized biases
      default:
        return false;  // float8 / int4: reported by lint, not converted
    }
  }
  return true;
}

void FillParams(const ir::Node* node, const ir::Value* x, QdqUnit* u) {
  u->constant_params = ReadFloats(node->input(1), &u->scale) &&
                       ReadZeroPoints(node->input(2), &u->zero_point, &u->quant_dtype);
  if (u->constant_params) u->scale_dtype = node->input(1)->initializer->dtype();
  if (u->zero_point.empty()) u->zero_point.assign(u->scale.size(), 0);
  u->axis_attr_present = node->has_attr("axis");
  if (u->scale.size() > 1 ||
      (node->input(1) && node->input(1)->type.has_shape && node->input(1)->type.dims.size() == 1)) {
    int64_t axis = node->GetInt("axis", 1);
    if (axis < 0 && x && x->type.has_shape) axis += static_cast<int64_t>(x->type.dims.size());
    if (axis < 0 && x && x->initializer) axis += x->initializer->rank();
    u->axis = axis;
  }
}

}  // namespace

bool QdqUnit::symmetric() const {
  for (int32_t z : zero_point) {
    if (z != 0) return false;
  }
  return quant_dtype == ir::DType::kInt8 || quant_dtype == ir::DType::kInt16;
}

std::vector<QdqUnit> FindQdqUnits(const ir::Graph& graph) {
  std::vector<QdqUnit> units;
  for (ir::Node* dq : graph.nodes()) {
    if (!IsOp(dq, "DequantizeLinear") || !dq->input(0) || !dq->output(0)) continue;
    QdqUnit u;
    u.dq = dq;
    u.y = dq->output(0);
    ir::Node* q = dq->input(0)->producer();
    if (IsOp(q, "QuantizeLinear") && q->input(0)) {
      u.q = q;
      u.x = q->input(0);
      FillParams(q, u.x, &u);
      // The DQ must undo exactly this quantization for the pair to be a fake-quant unit.
      const bool same_scale =
          dq->input(1) == q->input(1) ||
          (dq->input(1) && q->input(1) && dq->input(1)->initializer && q->input(1)->initializer &&
           dq->input(1)->initializer->ContentEquals(*q->input(1)->initializer));
      const bool same_zp =
          dq->input(2) == q->input(2) ||
          (dq->input(2) && q->input(2) && dq->input(2)->initializer && q->input(2)->initializer &&
           dq->input(2)->initializer->ContentEquals(*q->input(2)->initializer));
      u.dq_params_match = same_scale && same_zp;
      u.weight = u.x->is_constant();
    } else if (dq->input(0)->is_constant()) {
      u.x = dq->input(0);
      FillParams(dq, u.x, &u);
      // Without a zero point the stored data's dtype is the quantized dtype (int32 biases).
      if (!dq->input(2))
        u.quant_dtype = u.x->initializer ? u.x->initializer->dtype() : u.quant_dtype;
      u.weight = true;
    } else {
      continue;  // DQ of a runtime integer tensor (QOperator graphs): not a Q/DQ unit
    }
    units.push_back(std::move(u));
  }
  return units;
}

}  // namespace quantkit::passes
