#include "passes/strip_qdq.h"

#include "common/check.h"
#include "ir/float16.h"
#include "ir/verifier.h"
#include "passes/qdq_pairs.h"
#include "quant/params.h"

namespace quantkit::passes {
namespace {

// y = (q - z) * s per channel along `axis` (-1: one scale), computed in float as ONNX does, in
// the DequantizeLinear's output type (the scale's: float16 scales give a float16 weight, rounded
// once, so the stripped FP16 model stays well typed).
Result<ir::Tensor> DequantizeConstant(const QdqUnit& u) {
  const ir::Tensor& q = *u.x->initializer;
  QK_RETURN_IF_NOT(q.dtype() == ir::DType::kInt8 || q.dtype() == ir::DType::kUint8 ||
                       q.dtype() == ir::DType::kInt32,
                   StatusCode::kUnsupported,
                   "weight '{}' is {}; only int8/uint8/int32 are dequantized", u.x->name(),
                   ir::DTypeName(q.dtype()));
  ir::Tensor out(ir::DType::kFloat, q.dims());
  int64_t inner = 1;
  int64_t channels = 1;
  if (u.axis >= 0) {
    QK_RETURN_IF_NOT(u.axis < q.rank(), StatusCode::kInvalidModel,
                     "DequantizeLinear '{}': axis {} out of range for '{}'", u.dq->name, u.axis,
                     u.x->name());
    channels = q.dims()[static_cast<size_t>(u.axis)];
    for (int64_t i = u.axis + 1; i < q.rank(); ++i) inner *= q.dims()[static_cast<size_t>(i)];
  }
  QK_RETURN_IF_NOT(static_cast<int64_t>(u.scale.size()) == channels, StatusCode::kInvalidModel,
                   "DequantizeLinear '{}': {} scales for {} channels of '{}'", u.dq->name,
                   u.scale.size(), channels, u.x->name());
  float* dst = out.mutable_data_as<float>();
  for (int64_t i = 0; i < q.numel(); ++i) {
    const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
    int32_t v = 0;
    switch (q.dtype()) {
      case ir::DType::kInt8:
        v = q.data_as<int8_t>()[i];
        break;
      case ir::DType::kUint8:
        v = q.data_as<uint8_t>()[i];
        break;
      default:
        v = q.data_as<int32_t>()[i];
        break;
    }
    dst[i] =
        quant::Dequantize(v, u.scale[static_cast<size_t>(c)], u.zero_point[static_cast<size_t>(c)]);
  }
  if (u.scale_dtype != ir::DType::kFloat) return ir::ConvertFloatTensor(out, u.scale_dtype);
  return out;
}

}  // namespace

int RemoveUnusedInitializers(ir::Graph& graph) {
  int removed = 0;
  for (ir::Value* v : graph.initializers()) {
    if (v->uses().empty() && !v->is_graph_input() && !v->is_graph_output()) {
      v->initializer.reset();
      if (graph.RemoveValue(v).ok()) ++removed;
    }
  }
  return removed;
}

Status StripQdq::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& graph = *model.graph;
  int64_t pairs_removed = 0, weights_dequantized = 0, left_in_place = 0;
  for (const QdqUnit& u : FindQdqUnits(graph)) {
    if (u.q) {
      if (!u.dq_params_match || u.q->output(0)->uses().size() != 1) {
        ++left_in_place;  // not a pure fake-quant pair: removing it would change results
        continue;
      }
      const std::string y_name = u.y->name();  // u.y is deleted with the DQ node
      if (u.y->is_graph_output()) {
        // Keep the output's name: x -> Identity -> y.
        QK_ASSIGN_OR_RETURN(ir::Node * id,
                            graph.InsertNodeBefore(u.q, "Identity", {u.x},
                                                   {graph.UniqueValueName(y_name + "_float")}, "",
                                                   graph.UniqueNodeName(u.dq->name + "_Identity")));
        id->output(0)->type = u.y->type;  // graph outputs must keep their declared type
        id->output(0)->doc_string = u.y->doc_string;
        graph.ReplaceAllUsesWith(u.y, id->output(0));
        QK_RETURN_IF_ERROR(graph.RemoveNode(u.dq));
        QK_RETURN_IF_ERROR(graph.RenameValue(id->output(0), y_name));
      } else {
        graph.ReplaceAllUsesWith(u.y, u.x);
        QK_RETURN_IF_ERROR(graph.RemoveNode(u.dq));
      }
      QK_RETURN_IF_ERROR(graph.RemoveNode(u.q));
      ++pairs_removed;
    } else {
      if (!u.constant_params) {
        ++left_in_place;
        continue;
      }
      QK_ASSIGN_OR_RETURN(ir::Tensor w, DequantizeConstant(u));
      const std::string name = u.y->name();
      ir::Value* tmp =
          graph.AddInitializer(graph.UniqueValueName(name + "_dequantized"), std::move(w));
      graph.ReplaceAllUsesWith(u.y, tmp);
      QK_RETURN_IF_ERROR(graph.RemoveNode(u.dq));
      QK_RETURN_IF_ERROR(graph.RenameValue(tmp, name));
      tmp->initializer->name = name;
      ++weights_dequantized;
    }
  }
  const int initializers_removed = RemoveUnusedInitializers(graph);
  QK_RETURN_IF_ERROR(ir::Verify(model));
  report->Add(counter::kPairsRemoved, pairs_removed);
  report->Add(counter::kWeightsDequantized, weights_dequantized);
  report->Add(counter::kLeftInPlace, left_in_place);
  report->Add(counter::kInitializersRemoved, initializers_removed);
  report->changed = pairs_removed + weights_dequantized + initializers_removed > 0;
  report->summary =
      fmt::format("stripped {} Q/DQ pairs, dequantized {} stored weights, {} left in place",
                  pairs_removed, weights_dequantized, left_in_place);
  return Status::Ok();
}

}  // namespace quantkit::passes
