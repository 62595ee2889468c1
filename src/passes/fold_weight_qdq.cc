#include "passes/fold_weight_qdq.h"

#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "ir/float16.h"
#include "quant/params.h"
#include "runtime/trt_fusions.h"

namespace quantkit::passes {
namespace {

const ir::Tensor* ConstantOf(const ir::Value* v) {
  return v && v->is_constant() && v->initializer ? &*v->initializer : nullptr;
}

bool IsOp(const ir::Node* n, const char* op) {
  return n != nullptr && n->domain().empty() && n->op_type() == op;
}

// The zero point of channel c (0 when absent).
int32_t ZeroPointAt(const ir::Tensor* zp, int64_t c) {
  if (zp == nullptr) return 0;
  return zp->dtype() == ir::DType::kInt8 ? zp->data_as<int8_t>()[c] : zp->data_as<uint8_t>()[c];
}

// What one weight unit computes, element by element: the quantized code of element i.
struct Codes {
  const ir::Tensor* float_weight = nullptr;  // pair: quantize these values
  const ir::Tensor* stored = nullptr;        // dq-only: the int8 / uint8 codes
  std::vector<float> values;                 // float_weight as float32
  quant::QuantRange range{};
  int32_t At(int64_t i, float scale, int32_t z) const {
    if (stored == nullptr)
      return quant::QuantizeValue(values[static_cast<size_t>(i)], scale, z, range);
    return stored->dtype() == ir::DType::kInt8 ? stored->data_as<int8_t>()[i]
                                               : stored->data_as<uint8_t>()[i];
  }
};

// (q - z) * s per tensor or per axis, in float32, stored as `out_type` (rounded to nearest even).
Result<ir::Tensor> Fold(const Codes& codes, const ir::Tensor& scale, const ir::Tensor* zp,
                        int64_t axis, ir::DType out_type, const std::string& name) {
  const ir::Tensor& w = codes.stored ? *codes.stored : *codes.float_weight;
  std::vector<float> s;
  QK_RETURN_IF_NOT(ir::ReadFloatValues(scale, &s), StatusCode::kUnsupported,
                   "weight '{}': scale of type {} does not fold", name,
                   ir::DTypeName(scale.dtype()));
  QK_RETURN_IF_NOT(!zp || zp->numel() == scale.numel(), StatusCode::kInvalidArgument,
                   "weight '{}': {} scales but {} zero points", name, scale.numel(), zp->numel());
  const int64_t channels = scale.numel();
  int64_t inner = 1, dim = 1;
  if (channels > 1) {
    const int64_t a = axis < 0 ? axis + w.rank() : axis;
    QK_RETURN_IF_NOT(
        a >= 0 && a < w.rank() && w.dims()[a] == channels, StatusCode::kInvalidArgument,
        "weight '{}': {} scales do not match axis {} of {} dims", name, channels, axis, w.rank());
    dim = w.dims()[a];
    for (int64_t i = a + 1; i < w.rank(); ++i) inner *= w.dims()[i];
  }
  std::vector<float> out(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = channels > 1 ? (i / inner) % dim : 0;
    const int32_t z = ZeroPointAt(zp, c);
    out[static_cast<size_t>(i)] = quant::Dequantize(codes.At(i, s[c], z), s[c], z);
  }
  ir::Tensor folded = ir::Tensor::FromVector<float>(ir::DType::kFloat, w.dims(), out);
  if (out_type == ir::DType::kFloat) return folded;
  return ir::ConvertFloatTensor(folded, out_type);
}

// The folded value of the unit ending in `dq`, or nullptr (with OK) when it is not a weight unit.
Result<std::optional<ir::Tensor>> FoldUnit(const ir::Node* dq) {
  const ir::Node* q = dq->input(0) ? dq->input(0)->producer() : nullptr;
  const ir::Tensor* scale = ConstantOf(dq->input(1));
  const ir::Tensor* zp = ConstantOf(dq->input(2));
  if (!scale || (dq->input(2) && !zp) || dq->has_attr("block_size") ||
      dq->has_attr("output_dtype") || dq->output(0)->is_graph_output()) {
    return std::optional<ir::Tensor>();
  }
  if (zp && zp->dtype() != ir::DType::kInt8 && zp->dtype() != ir::DType::kUint8)
    return std::optional<ir::Tensor>();
  Codes codes;
  std::string name;
  if (IsOp(q, "QuantizeLinear")) {
    const ir::Tensor* w = ConstantOf(q->input(0));
    // Only pairs that share scale/zero point/axis are one fake quantization (InsertQdq's are).
    if (!w || q->input(1) != dq->input(1) || q->input(2) != dq->input(2) ||
        q->GetInt("axis", 1) != dq->GetInt("axis", 1) || q->has_attr("block_size") ||
        q->has_attr("output_dtype") || !ir::ReadFloatValues(*w, &codes.values)) {
      return std::optional<ir::Tensor>();
    }
    codes.float_weight = w;
    QK_ASSIGN_OR_RETURN(codes.range, quant::RangeFor(zp ? zp->dtype() : ir::DType::kUint8));
    name = q->input(0)->name();
  } else {
    const ir::Tensor* stored = ConstantOf(dq->input(0));
    if (!stored || (stored->dtype() != ir::DType::kInt8 && stored->dtype() != ir::DType::kUint8) ||
        stored->nbytes() < static_cast<size_t>(stored->numel())) {
      return std::optional<ir::Tensor>();
    }
    codes.stored = stored;
    name = dq->input(0)->name();
  }
  // The DequantizeLinear's output type, or float32 where an INT8 layer reads the codes itself.
  const ir::DType out_type =
      runtime::FusedIntoInt8Layers(dq->output(0)) ? ir::DType::kFloat : scale->dtype();
  QK_ASSIGN_OR_RETURN(ir::Tensor folded,
                      Fold(codes, *scale, zp, dq->GetInt("axis", 1), out_type, name));
  return std::optional<ir::Tensor>(std::move(folded));
}

}  // namespace

Status FoldWeightQdq::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& graph = *model.graph;
  int64_t folded = 0;
  for (ir::Node* dq : graph.nodes()) {
    if (!IsOp(dq, "DequantizeLinear") || !dq->input(0) || !dq->output(0)) continue;
    QK_ASSIGN_OR_RETURN(std::optional<ir::Tensor> value, FoldUnit(dq));
    if (!value) continue;
    ir::Node* q = dq->input(0)->producer();
    const std::string name = (q ? q->input(0) : dq->input(0))->name();
    ir::Value* folded_value =
        graph.AddInitializer(graph.UniqueValueName(name + "_fakequant"), std::move(*value));
    graph.ReplaceAllUsesWith(dq->output(0), folded_value);
    QK_RETURN_IF_ERROR(graph.RemoveNode(dq));
    if (q && q->output(0)->uses().empty() && !q->output(0)->is_graph_output()) {
      QK_RETURN_IF_ERROR(graph.RemoveNode(q));
    }
    ++folded;
  }
  report->Add(counter::kFolded, folded);
  report->changed = folded > 0;
  return Status::Ok();
}

}  // namespace quantkit::passes
