// Rewrites  y = Identity(c)  ->  initializer y = c   when c is a constant initializer,
// in a graph and its subgraphs. torch.onnx shares constants this way (e.g. the zero points of
// QAT exports), and TensorRT's importer sees through it, so Q/DQ analysis must too. The tensor's
// bytes are shared with c, not copied; graph outputs keep their producer (left alone).
#pragma once

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::passes {

Status FoldIdentityOfConstants(ir::Graph& graph, int* folded = nullptr);

// PromoteConstants then FoldIdentityOfConstants: what every quantization workflow runs after
// import so that weights, scales and zero points are initializers.
Status PrepareConstants(ir::Graph& graph);

}  // namespace quantkit::passes
