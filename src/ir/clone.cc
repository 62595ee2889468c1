#include "ir/clone.h"

#include <unordered_map>
#include <vector>

#include "common/check.h"

namespace quantkit::ir {

Result<Attribute> CloneAttribute(const Attribute& a, Graph* owner) {
  Attribute c;
  c.name = a.name;
  c.type = a.type;
  c.doc_string = a.doc_string;
  c.ref_attr_name = a.ref_attr_name;
  c.f = a.f;
  c.i = a.i;
  c.s = a.s;
  c.t = a.t;
  c.floats = a.floats;
  c.ints = a.ints;
  c.strings = a.strings;
  c.tensors = a.tensors;
  for (const auto& sub : a.graphs) {
    QK_ASSIGN_OR_RETURN(std::unique_ptr<Graph> copy, CloneGraph(*sub, owner));
    c.graphs.push_back(std::move(copy));
  }
  c.sparse_tensors = a.sparse_tensors;
  c.type_protos = a.type_protos;
  return c;
}

Result<std::unique_ptr<Graph>> CloneGraph(const Graph& graph, Graph* parent) {
  auto g = std::make_unique<Graph>(parent);
  g->name = graph.name;
  g->doc_string = graph.doc_string;
  g->metadata_props = graph.metadata_props;
  g->quantization_annotations = graph.quantization_annotations;

  // Values first, in creation order (UniqueValueName and value_info export follow it).
  std::unordered_map<const Value*, Value*> value_of;
  for (const Value* v : graph.values()) {
    Value* c = g->CreateValue(v->name());
    QK_CHECK(c != nullptr, "CloneGraph: value '{}' twice", v->name());
    c->type = v->type;
    c->has_value_info = v->has_value_info;
    c->doc_string = v->doc_string;
    c->metadata_props = v->metadata_props;
    if (v->is_outer_scope()) g->MarkOuterScope(c);
    value_of[v] = c;
  }
  auto map = [&](const Value* v) -> Value* { return v ? value_of.at(v) : nullptr; };
  for (const Value* v : graph.initializers())
    g->AddInitializer(v->name(), *v->initializer);  // bytes shared
  for (const Value* v : graph.sparse_initializers()) {
    g->AddSparseInitializer(v->name(), std::make_shared<SparseTensor>(*v->sparse_initializer));
  }
  for (const Value* v : graph.inputs()) g->AddInput(map(v));
  for (const Value* v : graph.outputs()) g->AddOutput(map(v));

  std::unordered_map<const Node*, Node*> node_of;
  for (const Node* n : graph.nodes()) {
    std::vector<Value*> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(map(v));
    std::vector<std::string> outputs;
    for (const Value* v : n->outputs()) outputs.push_back(v ? v->name() : std::string());
    QK_ASSIGN_OR_RETURN(Node * c, g->AddNode(n->op_type(), inputs, outputs, n->domain(), n->name));
    c->doc_string = n->doc_string;
    c->overload = n->overload;
    c->metadata_props = n->metadata_props;
    for (const Attribute& a : n->attributes()) {
      QK_ASSIGN_OR_RETURN(Attribute copy, CloneAttribute(a, g.get()));
      c->attributes().push_back(std::move(copy));
    }
    node_of[n] = c;
  }
  // AddNode recorded uses in node order; a rewritten original may list them in another order
  // (ReplaceAllUsesWith appends). Re-setting each input in the original's order re-appends its
  // use, so every use list ends in the original's order.
  for (const Value* v : graph.values()) {
    for (const Use& u : v->uses()) {
      g->SetNodeInput(node_of.at(u.node), static_cast<size_t>(u.input_index), value_of.at(v));
    }
  }
  return g;
}

Result<Model> CloneModel(const Model& model) {
  Model m;
  m.ir_version = model.ir_version;
  m.opset_imports = model.opset_imports;
  m.producer_name = model.producer_name;
  m.producer_version = model.producer_version;
  m.domain = model.domain;
  m.model_version = model.model_version;
  m.doc_string = model.doc_string;
  m.metadata_props = model.metadata_props;
  QK_ASSIGN_OR_RETURN(m.graph, CloneGraph(*model.graph, nullptr));
  m.functions = model.functions;
  m.training_info = model.training_info;
  m.source_path = model.source_path;
  return m;
}

}  // namespace quantkit::ir
