// Rewrites a Q/DQ model into its float equivalent (fake quantization removed):
//
//   x -Q(s,z)-> q -DQ(s,z)-> y   ==>  x feeds every consumer of y
//                                     (an Identity x -> y is kept when y is a graph output, so the
//                                      model's output names do not change)
//   W_q -DQ(s,z)-> y             ==>  y = (W_q - z) * s as a float initializer (same name)
//
// then removes initializers nothing reads any more. Q nodes whose output has other consumers
// and DQ nodes of runtime integer tensors (QOperator graphs) are left alone and counted.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "pairs_removed", "weights_dequantized", "left_in_place" (pairs that are not a pure
// fake quantization, kept because removing them would change results) and
// "initializers_removed".
class StripQdq final : public Pass {
 public:
  const char* Name() const override { return "strip_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

// Removes initializers that have no uses and are neither graph inputs nor outputs; returns how
// many were removed.
int RemoveUnusedInitializers(ir::Graph& graph);

}  // namespace quantkit::passes
