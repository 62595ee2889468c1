// ir::Verify checks the IR invariants and fails at the first violation, naming the node/value:
//
//   I1  every value has at most one definition: a graph input, an initializer, a node output or
//       an outer-scope capture (exactly one for values that are used);
//   I2  every node input and graph output is defined in its graph (or captured from an enclosing
//       graph that defines it);
//   I3  use-def links are consistent: each input slot is listed in its value's uses and each use
//       points back at that slot; each output's producer is the node that lists it;
//   I4  the graph is acyclic;
//   I5  the opset imports cover every domain used by a node (Model-level check);
//   I6  Q/DQ scale and zero-point shapes are legal: scale and zero-point have as many elements,
//       rank 0/1 (or the input's rank for blocked quantization), and a 1-D scale of more than
//       one element matches the input's size on `axis` where both are known; and their types
//       are ONNX's where known: Q reads float (or int32) and writes the zero point's quantized
//       type, DQ reads a quantized (or int32) tensor with a zero point of the same type, the
//       scale is a non-empty float tensor, both have x and a scale.
//
// Subgraphs are verified recursively.
#pragma once

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::ir {

Status Verify(const Graph& graph);
Status Verify(const Model& model);

}  // namespace quantkit::ir
