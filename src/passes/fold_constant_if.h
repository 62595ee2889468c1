// Rewrites  y... = If(c){then_branch}{else_branch}  ->  the taken branch's nodes inlined, y... =
// its outputs,  when c is known without data: a constant initializer (Constant nodes are promoted
// by PromoteConstants first), or computed from constants and the static dimensions of Shape(x)
// through a few scalar ops (Gather, Equal/Less/Greater/..., Not/And/Or/Xor, Cast, Identity,
// Squeeze, Unsqueeze, Reshape, Flatten, Size). Exporters write exactly this for Python
// `if x.size(1) == 3:` on a model whose input declares that dimension.
//
// Why: Q/DQ placement, calibration and simulation cover the main graph only; the convolutions of a
// branch that is always taken would otherwise stay in float. Folding is exact (the graph computes
// the same outputs for every input the model accepts, since the condition does not depend on data).
//
// Guarantees: the If's output names are kept (graph outputs included); the branch's own names are
// kept where they are free in the enclosing graph, else made unique; initializers of the branch
// move with it; nested subgraphs move with their nodes. Ifs whose condition depends on data
// (e.g. a scalar graph input) are left as they are. Nested Ifs and Ifs inside Loop/Scan bodies
// fold too. Does not fold where a rename would break a nested subgraph's capture by name.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "folded" (If nodes replaced by their taken branch); its summary says how many.
class FoldConstantIf final : public Pass {
 public:
  const char* Name() const override { return "fold_constant_if"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
