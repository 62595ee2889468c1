#include "passes/fold_weight_qdq.h"

#include <vector>

#include "common/check.h"
#include "quant/params.h"

namespace quantkit::passes {
namespace {

const ir::Tensor* ConstantOf(const ir::Value* v) {
  return v && v->is_constant() && v->initializer ? &*v->initializer : nullptr;
}

// Fake-quantized copy of a float weight W with per-tensor or per-axis scale / zero point.
Result<ir::Tensor> FakeQuantize(const ir::Tensor& w, const ir::Tensor& scale, const ir::Tensor* zp,
                                int64_t axis, const std::string& name) {
  QK_RETURN_IF_NOT(w.dtype() == ir::DType::kFloat && scale.dtype() == ir::DType::kFloat,
                   StatusCode::kUnsupported, "weight '{}': only float weights and scales fold", name);
  const ir::DType qtype = zp ? zp->dtype() : ir::DType::kUint8;
  QK_ASSIGN_OR_RETURN(quant::QuantRange range, quant::RangeFor(qtype));
  QK_RETURN_IF_NOT(!zp || zp->numel() == scale.numel(), StatusCode::kInvalidArgument,
                   "weight '{}': {} scales but {} zero points", name, scale.numel(), zp->numel());
  const int64_t channels = scale.numel();
  int64_t inner = 1, dim = 1;
  if (channels > 1) {
    const int64_t a = axis < 0 ? axis + w.rank() : axis;
    QK_RETURN_IF_NOT(a >= 0 && a < w.rank() && w.dims()[a] == channels, StatusCode::kInvalidArgument,
                     "weight '{}': {} scales do not match axis {} of {} dims", name, channels, axis,
                     w.rank());
    dim = w.dims()[a];
    for (int64_t i = a + 1; i < w.rank(); ++i) inner *= w.dims()[i];
  }
  std::vector<float> out(static_cast<size_t>(w.numel()));
  const float* x = w.data_as<float>();
  const float* s = scale.data_as<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = channels > 1 ? (i / inner) % dim : 0;
    int32_t z = 0;
    if (zp) z = qtype == ir::DType::kInt8 ? zp->data_as<int8_t>()[c] : zp->data_as<uint8_t>()[c];
    out[i] = quant::Dequantize(quant::QuantizeValue(x[i], s[c], z, range), s[c], z);
  }
  return ir::Tensor::FromVector<float>(ir::DType::kFloat, w.dims(), out);
}

}  // namespace

Status FoldWeightQdq::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& graph = *model.graph;
  int64_t folded = 0;
  for (ir::Node* dq : graph.nodes()) {
    if (dq->op_type() != "DequantizeLinear" || !dq->domain().empty()) continue;
    ir::Node* q = dq->input(0) ? dq->input(0)->producer() : nullptr;
    if (!q || q->op_type() != "QuantizeLinear" || !q->domain().empty()) continue;
    const ir::Tensor* w = ConstantOf(q->input(0));
    const ir::Tensor* scale = ConstantOf(q->input(1));
    const ir::Tensor* zp = ConstantOf(q->input(2));
    // Only pairs that share scale/zero point/axis are one fake quantization (InsertQdq's are).
    if (!w || !scale || q->input(1) != dq->input(1) || q->input(2) != dq->input(2) ||
        q->GetInt("axis", 1) != dq->GetInt("axis", 1) || q->has_attr("block_size") ||
        dq->output(0)->is_graph_output()) {
      continue;
    }
    const std::string name = q->input(0)->name();
    QK_ASSIGN_OR_RETURN(ir::Tensor fq, FakeQuantize(*w, *scale, zp, q->GetInt("axis", 1), name));
    ir::Value* folded_value = graph.AddInitializer(graph.UniqueValueName(name + "_fakequant"), std::move(fq));
    graph.ReplaceAllUsesWith(dq->output(0), folded_value);
    QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
    if (q->output(0)->uses().empty() && !q->output(0)->is_graph_output()) {
      QK_RETURN_IF_ERROR(graph.RemoveNode(q));
    }
    ++folded;
  }
  report->Add(counter::kFolded, folded);
  report->changed = folded > 0;
  return Status::Ok();
}

}  // namespace quantkit::passes
