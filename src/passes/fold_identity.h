// Rewrites  y = Identity(c)  ->  initializer y = c   when c is a constant initializer,
// in a graph and its subgraphs. torch.onnx shares constants this way (e.g. the zero points of
// QAT exports), and TensorRT's importer sees through it, so Q/DQ analysis must too. The tensor's
// bytes are shared with c, not copied; graph outputs keep their producer (left alone).
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Counts "folded".
class FoldIdentityOfConstants final : public Pass {
 public:
  const char* Name() const override { return "fold_identity_of_constants"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
