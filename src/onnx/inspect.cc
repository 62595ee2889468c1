#include "onnx/inspect.h"

namespace quantkit::onnx_io {
namespace {

ValueSummary SummarizeValue(const ir::Value& v) {
  ValueSummary s;
  s.name = v.name();
  s.type = v.type.ToString();
  const bool typed = v.type.kind == ir::TypeInfo::Kind::kTensor ||
                     v.type.kind == ir::TypeInfo::Kind::kSparseTensor;
  s.dtype = typed ? std::string(ir::DTypeName(v.type.dtype)) : "?";
  s.has_shape = typed && v.type.has_shape;
  if (s.has_shape) {
    for (const ir::Dim& d : v.type.dims) {
      s.dims.push_back(d.is_known() ? std::to_string(d.value) : d.is_symbolic() ? d.param : "?");
      s.dim_values.push_back(d.is_known() ? d.value : -1);
    }
  }
  return s;
}

// Bytes a Constant node's attribute holds (the tensor it produces).
uint64_t ConstantBytes(const ir::Node& node) {
  uint64_t bytes = 0;
  for (const ir::Attribute& a : node.attributes()) {
    bytes += a.t.nbytes() + a.floats.size() * sizeof(float) + a.ints.size() * sizeof(int64_t);
    if (a.type == ir::AttrType::kFloat) bytes += sizeof(float);
    if (a.type == ir::AttrType::kInt) bytes += sizeof(int64_t);
    for (const ir::SparseTensor& s : a.sparse_tensors)
      bytes += s.values.nbytes() + s.indices.nbytes();
  }
  return bytes;
}

void Add(WeightStats* stats, uint64_t bytes) {
  ++stats->count;
  stats->bytes += bytes;
}

}  // namespace

ModelSummary Summarize(const ir::Model& model) {
  ModelSummary s;
  s.path = model.source_path;
  s.ir_version = model.ir_version;
  s.opsets = model.opset_imports;
  s.producer_name = model.producer_name;
  s.producer_version = model.producer_version;
  s.num_functions = static_cast<int64_t>(model.functions.size());
  for (const ir::Value* v : model.graph->inputs()) {
    if (!v->is_initializer()) s.inputs.push_back(SummarizeValue(*v));
  }
  for (const ir::Value* v : model.graph->outputs()) s.outputs.push_back(SummarizeValue(*v));
  ir::ForEachGraph(*model.graph, [&s, &model](ir::Graph& g) {
    if (&g != model.graph.get()) ++s.num_subgraphs;
    for (const ir::Value* v : g.initializers()) {
      const ir::Tensor& t = *v->initializer;
      Add(&s.initializers, t.nbytes());
      if (t.location == ir::TensorLocation::kExternal) {
        Add(&s.external_initializers, t.nbytes());
        Add(&s.external_files[t.external.location], t.nbytes());
      } else {
        Add(&s.inline_initializers, t.nbytes());
      }
    }
    for (const ir::Value* v : g.sparse_initializers()) {
      Add(&s.sparse_initializers,
          v->sparse_initializer->values.nbytes() + v->sparse_initializer->indices.nbytes());
    }
    for (const ir::Node* node : g.nodes()) {
      ++s.num_nodes;
      const std::string key =
          node->domain().empty() ? node->op_type() : node->domain() + "::" + node->op_type();
      ++s.op_histogram[key];
      if (node->domain().empty() && node->op_type() == "Constant") {
        Add(&s.constant_nodes, ConstantBytes(*node));
      }
    }
  });
  return s;
}

}  // namespace quantkit::onnx_io
