// Shape and dtype propagation over the IR (no protobuf, no ATen).
//
// InferShapes visits nodes in topological order and fills Value::type of node outputs for the
// ops of common CNN, detector and transformer exports (Conv, ConvTranspose, Gemm, MatMul,
// pooling, normalisation, elementwise with broadcasting, activations, Reshape/Transpose/Flatten/
// Concat/Split/Slice/Squeeze/Unsqueeze/Gather with constant shape operands, Softmax, Resize,
// Shape, Cast, Q/DQ, reductions...). Symbolic dims are kept by name; a dim that cannot be known
// is left unknown.
//
// Contract:
//  - a type declared in the model (value_info, graph outputs) is never overwritten: it is the
//    fallback for ops this pass does not know and the authority where both exist;
//  - has_value_info is not changed, so export stays lossless (inferred types are not written);
//  - unknown ops and non-constant shape operands leave the outputs untyped; that is not an
//    error. A graph with a cycle fails (kInvalidModel).
// Subgraphs are inferred too; captured values take the type of the enclosing definition.
//
// Rules are keyed by (domain, op_type, opset range), as the runtime's kernels are
// (runtime/registry.h): a node gets the rule of the opset its model imports for its domain
// (the default domain, com.quantkit's FakeQuantizeLinear, com.microsoft's Q/DQ), none otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::ir {

struct ShapeInferenceStats {
  int64_t inferred = 0;  // outputs that received a type
  int64_t declared = 0;  // outputs that kept a type declared in the model
  int64_t unknown = 0;   // outputs left untyped
};

// `opset` is the default-domain opset (attributes moved to inputs over versions); other domains
// count as not imported. The Model form takes every domain's opset from its imports.
Status InferShapes(Graph& graph, int64_t opset, ShapeInferenceStats* stats = nullptr);
Status InferShapes(Model& model, ShapeInferenceStats* stats = nullptr);

// The rows of the rule table, sorted by (domain, op_type, since).
inline constexpr int64_t kAnyOpset = std::numeric_limits<int64_t>::max();
struct ShapeRuleKey {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int64_t since = 1, until = kAnyOpset;  // inclusive
};
std::vector<ShapeRuleKey> ShapeRules();

// Numpy-style broadcast of two shapes; false when they are incompatible.
bool BroadcastDims(const std::vector<Dim>& a, const std::vector<Dim>& b, std::vector<Dim>* out);

}  // namespace quantkit::ir
