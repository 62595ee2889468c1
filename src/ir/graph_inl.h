#pragma once

namespace quantkit::ir {

template <typename Fn>
void ForEachGraph(Graph& graph, Fn&& fn) {
  fn(graph);
  for (Node* node : graph.nodes()) {
    for (Attribute& attr : node->attributes()) {
      for (auto& sub : attr.graphs) ForEachGraph(*sub, fn);
    }
  }
}

}  // namespace quantkit::ir
