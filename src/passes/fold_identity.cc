#include "passes/fold_identity.h"

#include "common/check.h"

namespace quantkit::passes {
namespace {

// Subgraphs first, so a branch's Identity folds before its enclosing graph is scanned.
Status FoldInGraph(ir::Graph& graph, int64_t* folded) {
  int64_t count = 0;
  for (ir::Node* node : graph.nodes()) {
    for (ir::Attribute& a : node->attributes()) {
      for (auto& sub : a.graphs) QK_RETURN_IF_ERROR(FoldInGraph(*sub, &count));
    }
  }
  for (ir::Node* node : graph.nodes()) {
    // Cheapest checks first; mutate only after all pass.
    if (!node->domain().empty() || node->op_type() != "Identity" || node->num_inputs() != 1)
      continue;
    const ir::Value* in = node->input(0);
    ir::Value* out = node->output(0);
    if (!in || !out || !in->is_constant() || !in->initializer || out->is_graph_output()) continue;
    const std::string name = out->name();
    ir::Tensor tensor = *in->initializer;  // shares the buffer
    ir::Value* tmp =
        graph.AddInitializer(graph.UniqueValueName(name + "_folded"), std::move(tensor));
    graph.ReplaceAllUsesWith(out, tmp);
    QK_RETURN_IF_ERROR(graph.RemoveNode(node));
    QK_RETURN_IF_ERROR(graph.RenameValue(tmp, name));
    tmp->initializer->name = name;
    ++count;
  }
  *folded += count;
  return Status::Ok();
}

}  // namespace

Status FoldIdentityOfConstants::Run(ir::Model& model, PassReport* report) const {
  int64_t folded = 0;
  QK_RETURN_IF_ERROR(FoldInGraph(*model.graph, &folded));
  report->Add(counter::kFolded, folded);
  report->changed = folded > 0;
  return Status::Ok();
}

}  // namespace quantkit::passes
