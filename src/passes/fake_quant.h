// Training graphs for QAT.
//
// QdqToFakeQuant rewrites
//     DequantizeLinear(QuantizeLinear(x, s, 0), s, 0)  ->  com.quantkit.training::FakeQuantize(x[,
//     s])
// for every pair of a Q/DQ model built by InsertQdq (symmetric int8, zero point 0, constant scale),
// so that the runtime's training mode (runtime/training_ops.h) can differentiate through it while
// computing the same values. Weight pairs (x an initializer) drop the scale input when weight
// scales are recomputed from the current weights; activation pairs keep theirs, marked lsq=1 when
// learned. A pair that is not of that form (another zero point, a non-constant scale) fails the
// rewrite before anything is mutated.
//
// FoldBatchNorm rewrites  BatchNormalization(Conv(x, W, b))  ->  Conv(x, W', b')  with frozen
// statistics, when the Conv output has no other reader and every BN input is constant:
//     k = scale / sqrt(var + eps);  W'[c] = W[c] * k[c];  b' = (b - mean) * k + B
// (double arithmetic, rounded to float32 once). The Conv takes the BN output's name, so plans
// keyed by tensor names still apply.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr const char* kFakeQuantDomain = "com.quantkit.training";

struct FakeQuantOptions {
  bool recompute_weight_scales = true;   // false: weights keep the plan's (frozen) scales
  bool learn_activation_scales = false;  // LSQ
};

// Counts "weight_pairs" and "activation_pairs", lists "weights". The learned scales are read off
// the rewritten graph with LearnedActivationScales.
class QdqToFakeQuant final : public Pass {
 public:
  explicit QdqToFakeQuant(const FakeQuantOptions& options) : options_(options) {}
  const char* Name() const override { return "qdq_to_fake_quant"; }
  Status Run(ir::Model& model, PassReport* report) const override;

 private:
  FakeQuantOptions options_;
};

// activation tensor -> the initializer holding its learned scale, for every FakeQuantize with
// lsq=1 (what QdqToFakeQuant wrote with learn_activation_scales).
std::map<std::string, std::string> LearnedActivationScales(const ir::Graph& graph);

// Counts "folded" (BatchNormalization nodes).
class FoldBatchNorm final : public Pass {
 public:
  const char* Name() const override { return "fold_batch_norm"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
