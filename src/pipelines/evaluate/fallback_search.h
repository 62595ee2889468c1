// The mixed-precision fallback search, independent of models: given candidate layers and a loss
// function ("how much worse than FP32" with a set of layers kept in float), find a small set that
// brings the loss within the budget.
//
//   1. baseline: loss({}) — done if already within budget;
//   2. rank: loss({c}) for every candidate alone; gain = baseline - loss({c}), best first;
//   3. greedy: walk the ranking, keep a layer when adding it lowers the loss, stop within budget;
//   4. refine: try removing each kept layer (smallest gain first); drop it when the loss stays
//      within budget (interactions make some greedy picks unnecessary).
// Unlike a contiguous bisect (Polygraphy), any subset can come out. Evaluations are memoized by
// set, and each one is recorded as a step with its wall time.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::pipelines {

using FloatSet = std::set<std::string>;
using LossFn = std::function<Result<double>(const FloatSet& float_layers)>;

struct SearchStep {
  std::string phase;  // "baseline", "rank", "greedy", "refine"
  std::string layer;  // the layer tried ("" for the baseline)
  FloatSet float_layers;
  double loss = 0;
  bool accepted = false;
  double seconds = 0;
};

struct RankedLayer {
  std::string layer;
  double loss_alone = 0;  // loss with only this layer in float
  double gain = 0;        // baseline - loss_alone
};

struct FallbackSearchOptions {
  double budget = 0.5;
  int max_float_layers = 0;  // 0: no limit
  // Asked before every evaluation after the baseline: true ends the search there with the best
  // set found so far (calibrate's repair ladder under its time cap). Empty: never.
  std::function<bool()> out_of_time;
};

struct FallbackSearchResult {
  double baseline_loss = 0;
  std::vector<RankedLayer> ranking;
  FloatSet float_layers;
  double loss = 0;
  bool within_budget = false;
  std::vector<SearchStep> steps;
  int evaluations = 0;   // distinct loss evaluations
  bool stopped = false;  // out_of_time ended the search before it was done
  double seconds = 0;
};

Result<FallbackSearchResult> SearchFallback(const std::vector<std::string>& candidates,
                                            const LossFn& loss,
                                            const FallbackSearchOptions& options);

}  // namespace quantkit::pipelines
