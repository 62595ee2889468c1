// `calibrate --method auto`, per tensor: after the per-model choice (the method whose plan agrees
// best with FP32 on held-out data, pipelines/calibrate/compare_methods.h), a greedy pass tries,
// tensor by tensor, the other methods' ranges and keeps a change only when the held-out score
// improves.
//
//   candidates  = activations whose amax differs across the methods by more than
//                 kAutoMinAmaxSpread (max/min), largest spread first: where the choice matters
//   for each candidate t, each method m != current(t):
//       score(plan with t -> m)  <  score(best so far)   =>  keep t -> m
//   score       = (loss of the metric vs FP32, output relative MSE), compared in that order
//
// Bounded cost: at most kAutoMaxTensorTrials plan evaluations (each a simulation of the held-out
// samples; no model re-collection: every plan is BuildPlan over the one statistics pass).
// The user's --override entries are never revisited.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pipelines/calibration_steps.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// Tensors whose ranges agree within 5% across the methods quantize alike: trying them is waste.
inline constexpr double kAutoMinAmaxSpread = 1.05;
// A trial costs one held-out simulation; 24 keeps auto within a few plain calibrations on the
// real-model set (docs/real-models.md, item 5).
inline constexpr int kAutoMaxTensorTrials = 24;

struct PlanScore {
  double loss = 0, rel_mse = 0;
  bool operator<(const PlanScore& o) const {
    return loss < o.loss || (loss == o.loss && rel_mse < o.rel_mse);
  }
};

struct TensorMethodChange {
  std::string tensor, from, to;  // method labels
  PlanScore before, after;
};

struct PerTensorChoice {
  MethodChoice methods;  // the per-model method plus the overrides kept
  PlanScore score;
  std::vector<TensorMethodChange> changes;
  int trials = 0;
  int candidates = 0;
  bool stopped = false;  // out_of_time ended the pass early (the best set so far is kept)
};

using PlanScorer = std::function<Result<PlanScore>(const MethodChoice&)>;

// Greedy per-tensor refinement from `start` (already scored `start_score`). `plans` holds one plan
// per method of `methods` (the same statistics), to rank the candidates by their amax spread.
// `out_of_time`, when given, is asked before each trial: true ends the pass with the best choice
// so far (the repair ladder's time cap).
Result<PerTensorChoice> ChoosePerTensor(const CalibrationSites& sites,
                                        const std::vector<quant::MethodRequest>& methods,
                                        const std::vector<quant::QuantPlan>& plans,
                                        const MethodChoice& start, PlanScore start_score,
                                        const PlanScorer& score,
                                        int max_trials = kAutoMaxTensorTrials,
                                        const std::function<bool()>& out_of_time = {});

}  // namespace quantkit::pipelines
