// Training graphs for QAT.
//
// QdqToFakeQuant rewrites
//     DequantizeLinear(QuantizeLinear(x, s, 0), s, 0)  ->  com.quantkit.training::FakeQuantize(x[, s])
// for every pair of a Q/DQ model built by InsertQdq (symmetric int8, zero point 0, constant scale),
// so that the runtime's training mode (runtime/training_ops.h) can differentiate through it while
// computing the same values. Weight pairs (x an initializer) drop the scale input when weight scales
// are recomputed from the current weights; activation pairs keep theirs, marked lsq=1 when learned.
// A pair that is not of that form (another zero point, a non-constant scale) fails the rewrite
// before anything is mutated.
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
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr const char* kFakeQuantDomain = "com.quantkit.training";

struct FakeQuantOptions {
  bool recompute_weight_scales = true;   // false: weights keep the plan's (frozen) scales
  bool learn_activation_scales = false;  // LSQ
};

struct FakeQuantReport {
  int weight_pairs = 0;
  int activation_pairs = 0;
  std::vector<std::string> weights;                         // quantized weight initializers
  std::map<std::string, std::string> activation_scale_of;   // activation tensor -> scale initializer
};

Result<FakeQuantReport> QdqToFakeQuant(ir::Model& model, const FakeQuantOptions& options);

// Returns the number of BatchNormalization nodes folded.
Result<int> FoldBatchNorm(ir::Graph& graph);

}  // namespace quantkit::passes
