#include "passes/fold_identity.h"

#include "common/check.h"
#include "passes/promote_constants.h"

namespace quantkit::passes {

Status FoldIdentityOfConstants(ir::Graph& graph, int* folded) {
  int count = 0;
  for (ir::Node* node : graph.nodes()) {
    for (ir::Attribute& a : node->attributes()) {
      for (auto& sub : a.graphs) QK_RETURN_IF_ERROR(FoldIdentityOfConstants(*sub, &count));
    }
  }
  for (ir::Node* node : graph.nodes()) {
    // Cheapest checks first; mutate only after all pass.
    if (!node->domain().empty() || node->op_type() != "Identity" || node->num_inputs() != 1) continue;
    const ir::Value* in = node->input(0);
    ir::Value* out = node->output(0);
    if (!in || !out || !in->is_constant() || !in->initializer || out->is_graph_output()) continue;
    const std::string name = out->name();
    ir::Tensor tensor = *in->initializer;  // shares the buffer
    ir::Value* tmp = graph.AddInitializer(graph.UniqueValueName(name + "_folded"), std::move(tensor));
    graph.ReplaceAllUsesWith(out, tmp);
    QK_RETURN_IF_ERROR(graph.RemoveNode(node));
    QK_RETURN_IF_ERROR(graph.RenameValue(tmp, name));
    tmp->initializer->name = name;
    ++count;
  }
  if (folded) *folded += count;
  return Status::Ok();
}

Status PrepareConstants(ir::Graph& graph) {
  QK_RETURN_IF_ERROR(PromoteConstants(graph));
  return FoldIdentityOfConstants(graph);
}

}  // namespace quantkit::passes
