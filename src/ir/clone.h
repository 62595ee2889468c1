// A deep copy of a model, for workflows that rewrite a model they must also keep (a fallback
// search builds one simulation model per trial from the loaded float model instead of reading
// and preparing the file again).
//
// Guarantees: the clone exports to the same bytes as the original, and every pass rewrites it as
// it rewrites the original: values are created in the original's order, nodes keep their stored
// order, every value's use list keeps its order (passes walk uses), initializers keep theirs, and
// subgraphs are cloned with their parent set. Tensor bytes are shared copy-on-write (ir::Tensor),
// so a clone copies no weights. The original is not touched.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::ir {

Result<Model> CloneModel(const Model& model);

// The graph and its subgraphs, under `parent` (null for a main graph).
Result<std::unique_ptr<Graph>> CloneGraph(const Graph& graph, Graph* parent);

// Every field of an attribute; its subgraphs (if any) are cloned under `owner`, the graph of the
// node that will hold the copy.
Result<Attribute> CloneAttribute(const Attribute& attribute, Graph* owner);

}  // namespace quantkit::ir
