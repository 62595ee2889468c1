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
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "promoted".
class PromoteConstants final : public Pass {
 public:
  const char* Name() const override { return "promote_constants"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
