// PrefixCache: fallback (and any series of similar trials) starts each simulated run from cached
// activations of the part of the graph the trial shares with a base plan's simulated model.
//
// A fallback trial keeps a few nodes in float; everything upstream of them computes exactly what
// the base simulation computed. The cache runs the base model once over the evaluator's batches
// and keeps, per batch, the activations live at a few checkpoints of the float model's
// topological order (as many evenly spaced checkpoints as fit a byte budget). For a trial model,
// Cut() finds which cached activations the trial computes identically: a value matches when its
// producer has the base's op, domain, attributes, output names and matching inputs (graph inputs,
// initializers with equal bytes, or matching values), by induction from the graph inputs. The
// trial then runs only what its outputs need beyond the matching cached values, which become
// graph inputs fed from the cache. Same kernels on the same input bits: the trial's outputs
// are the bits a full run gives (tests/e2e: fallback with and without the cache agree exactly).
//
// Assumes, as runtime::Interpreter does today, that a node's result does not depend on whether
// its inputs came from a feed or from the node before it (no cross-node fusion that changes
// numerics). Models with control flow (If/Loop bodies reading outer values) are never cut.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/plan_eval.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

// Default budget for cached activations, all batches of this process together.
inline constexpr int64_t kDefaultPrefixCacheBytes = int64_t{512} << 20;

class PrefixCache {
 public:
  // Runs `base`'s simulation over the evaluator's batches once and keeps the checkpoints that fit
  // `budget_bytes` (estimated from the first batch). A collective, like every evaluator run.
  static Result<std::unique_ptr<PrefixCache>> Create(const PlanEvaluator& evaluator,
                                                     const quant::QuantPlan& base,
                                                     int64_t budget_bytes);

  // Removes from `model` every node its outputs do not need once the matching cached
  // activations are given, which become graph inputs of the same names; returns those names
  // (empty: nothing matched, the model is unchanged).
  Result<std::vector<std::string>> Cut(ir::Model* model) const;
  // The cached activation `name` of batch `batch`.
  const ir::Tensor& Activation(const std::string& name, size_t batch) const;

  int checkpoints() const { return checkpoints_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<const ir::Model> base_;
  std::unordered_map<std::string, std::vector<ir::Tensor>> activations_;  // name -> per batch
  int checkpoints_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace quantkit::analysis
