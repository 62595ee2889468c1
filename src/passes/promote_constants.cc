#include "passes/promote_constants.h"

#include <cstring>
#include <optional>

#include "common/check.h"

namespace quantkit::passes {
namespace {

using ir::AttrType;
using ir::DType;

template <typename T>
ir::Tensor MakeTensor(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  return ir::Tensor::FromVector(dtype, std::move(dims), values);
}

// The constant a Constant node holds, as a dense tensor or a sparse one (exactly one is set).
struct ConstantValue {
  std::optional<ir::Tensor> dense;
  std::shared_ptr<ir::SparseTensor> sparse;
};

std::optional<ConstantValue> ValueOf(const ir::Node& node) {
  if (node.num_inputs() != 0 || node.attributes().size() != 1) return std::nullopt;
  const ir::Attribute& a = node.attributes().front();
  if (!a.ref_attr_name.empty()) return std::nullopt;  // resolved only when a function is inlined
  ConstantValue v;
  const auto n = static_cast<int64_t>(a.ints.size());
  if (a.name == "value" && a.type == AttrType::kTensor) {
    v.dense = a.t;
  } else if (a.name == "sparse_value" && a.type == AttrType::kSparseTensor &&
             a.sparse_tensors.size() == 1) {
    v.sparse = std::make_shared<ir::SparseTensor>(a.sparse_tensors.front());
  } else if (a.name == "value_float" && a.type == AttrType::kFloat) {
    v.dense = MakeTensor(DType::kFloat, {}, std::vector<float>{a.f});
  } else if (a.name == "value_floats" && a.type == AttrType::kFloats) {
    v.dense = MakeTensor(DType::kFloat, {static_cast<int64_t>(a.floats.size())}, a.floats);
  } else if (a.name == "value_int" && a.type == AttrType::kInt) {
    v.dense = MakeTensor(DType::kInt64, {}, std::vector<int64_t>{a.i});
  } else if (a.name == "value_ints" && a.type == AttrType::kInts) {
    v.dense = MakeTensor(DType::kInt64, {n}, a.ints);
  } else if (a.name == "value_string" && a.type == AttrType::kString) {
    ir::Tensor t(DType::kString, {});
    t.strings() = {a.s};
    v.dense = std::move(t);
  } else if (a.name == "value_strings" && a.type == AttrType::kStrings) {
    ir::Tensor t(DType::kString, {static_cast<int64_t>(a.strings.size())});
    t.strings() = a.strings;
    v.dense = std::move(t);
  } else {
    return std::nullopt;
  }
  return v;
}

Status PromoteInGraph(ir::Graph& graph, int64_t* promoted) {
  for (ir::Node* node : graph.nodes()) {
    // Guards, cheapest first; mutate only after all pass.
    if (node->op_type() != "Constant" || !node->domain().empty()) continue;
    ir::Value* out = node->output(0);
    if (out == nullptr || node->num_outputs() != 1) continue;
    std::optional<ConstantValue> value = ValueOf(*node);
    if (!value) continue;

    // The initializer takes the output's name: move the old value aside first.
    const std::string name = out->name();
    QK_RETURN_IF_ERROR(graph.RenameValue(out, graph.UniqueValueName(name + "__constant")));
    ir::Value* init = value->dense ? graph.AddInitializer(name, std::move(*value->dense))
                                   : graph.AddSparseInitializer(name, value->sparse);
    if (out->type.kind != ir::TypeInfo::Kind::kNone) init->type = out->type;
    init->has_value_info = out->has_value_info;
    init->doc_string = out->doc_string;
    init->metadata_props = out->metadata_props;
    graph.ReplaceAllUsesWith(out, init);
    QK_RETURN_IF_ERROR(graph.RemoveNode(node));
    ++*promoted;
  }
  return Status::Ok();
}

}  // namespace

Status PromoteConstants::Run(ir::Model& model, PassReport* report) const {
  int64_t promoted = 0;
  Status status;
  ir::ForEachGraph(*model.graph, [&](ir::Graph& g) {
    if (status.ok()) status = PromoteInGraph(g, &promoted);
  });
  report->Add(counter::kPromoted, promoted);
  report->changed = promoted > 0;
  return status;
}

}  // namespace quantkit::passes
