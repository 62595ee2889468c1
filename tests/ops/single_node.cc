#include "ops/single_node.h"

#include "common/check.h"

namespace quantkit::testing {

Result<std::vector<ir::Tensor>> RunSingleNode(SingleNode spec) {
  ir::Model m;
  m.SetOpset("", spec.opset);
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> ins;
  std::vector<runtime::NamedTensor> feeds;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (spec.inputs[i].dtype() == ir::DType::kUndefined) {
      ins.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.CreateValue("in" + std::to_string(i));
    std::vector<ir::Dim> dims;
    for (int64_t d : spec.inputs[i].dims()) dims.push_back(ir::Dim::Known(d));
    v->type = ir::TypeInfo::Tensor(spec.inputs[i].dtype(), dims);
    g.AddInput(v);
    ins.push_back(v);
    feeds.push_back({v->name(), spec.inputs[i]});
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < spec.num_outputs; ++i) outs.push_back("out" + std::to_string(i));
  QK_ASSIGN_OR_RETURN(ir::Node * node, g.AddNode(spec.op_type, ins, outs, "", "node0"));
  for (ir::Attribute& a : spec.attrs) node->SetAttr(std::move(a));
  for (ir::Value* v : node->outputs()) g.AddOutput(v);
  QK_ASSIGN_OR_RETURN(auto interp, runtime::Interpreter::Create(std::move(m)));
  QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> result, interp->Run(feeds));
  std::vector<ir::Tensor> tensors;
  for (auto& r : result) tensors.push_back(std::move(r.tensor));
  return tensors;
}

}  // namespace quantkit::testing
