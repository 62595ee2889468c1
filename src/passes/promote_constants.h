// PromoteConstants rewrites
//   y = Constant() <value = T>   ->   initializer y = T
// in a graph and all its subgraphs, so weights have one home whatever the exporter chose.
//
// Guarantees: the initializer keeps the Constant's output name (and its type/value_info/doc),
// every use and graph output is re-pointed, the graph still passes ir::Verify. Every Constant
// attribute form is handled: value (tensor), sparse_value (becomes a sparse initializer),
// value_float(s), value_int(s), value_string(s). Constants of other domains and Constants with
// attribute references (inside functions) are left alone.
#pragma once

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Sets *changed when at least one Constant was promoted (changed may be null).
Status PromoteConstants(ir::Graph& graph, bool* changed = nullptr);

}  // namespace quantkit::passes
