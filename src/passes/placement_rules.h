// Pieces of the placement rules (passes/qdq_placement.h) that lint and simulation share with
// FindQdqSites: the exclusion check (R5) and the backbone of a residual Add (R3). Implemented
// in qdq_placement.cc.
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "passes/qdq_placement.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// kNotFound when an excluded node name or op type matches nothing in `graph` (a typo must not
// silently quantize what the user meant to keep float); the message lists close names.
Status CheckExclusions(const ir::Graph& graph, const PlacementOptions& options);

// Longest path (in nodes) from the graph inputs to each node of `order` (a topological order).
std::unordered_map<const ir::Node*, int> NodeDepths(const std::vector<ir::Node*>& order);

// For an Add whose inputs `a` and `b` are produced by Convs `conv_a` and `conv_b` (R3): true when
// `conv_a` is the backbone (the Conv TensorRT fuses the Add into, whose output stays float).
// `position` is each node's index in topological order (the tie-break).
bool IsResidualBackbone(const ir::Node* conv_a, const ir::Node* conv_b,
                        const std::unordered_map<const ir::Node*, int>& depth,
                        const std::unordered_map<const ir::Node*, size_t>& position);

}  // namespace quantkit::passes
