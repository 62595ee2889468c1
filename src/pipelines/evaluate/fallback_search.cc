#include "pipelines/evaluate/fallback_search.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "common/check.h"

namespace quantkit::pipelines {

Result<FallbackSearchResult> SearchFallback(const std::vector<std::string>& candidates,
                                            const LossFn& loss,
                                            const FallbackSearchOptions& options) {
  QK_RETURN_IF_NOT(options.budget >= 0, StatusCode::kInvalidArgument,
                   "--budget must be >= 0, got {}", options.budget);
  const auto start = std::chrono::steady_clock::now();
  FallbackSearchResult r;
  std::map<FloatSet, double> memo;
  // Evaluates (or recalls) a set and records the step.
  // Memoized sets cost nothing, so they are answered even after the time is up.
  auto stop = [&](const FloatSet& set) {
    if (!r.stopped && !memo.count(set) && options.out_of_time && options.out_of_time())
      r.stopped = true;
    return r.stopped;
  };
  auto eval = [&](const std::string& phase, const std::string& layer,
                  const FloatSet& set) -> Result<double> {
    const auto t0 = std::chrono::steady_clock::now();
    double value;
    if (auto it = memo.find(set); it != memo.end()) {
      value = it->second;
    } else {
      QK_ASSIGN_OR_RETURN(value, loss(set));
      memo.emplace(set, value);
      ++r.evaluations;
    }
    SearchStep step{
        phase, layer, set,
        value, false, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    r.steps.push_back(step);
    return value;
  };
  auto within = [&](double l) { return l <= options.budget; };

  QK_ASSIGN_OR_RETURN(r.baseline_loss, eval("baseline", "", {}));
  r.loss = r.baseline_loss;
  r.steps.back().accepted = true;
  if (within(r.baseline_loss)) {
    r.within_budget = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }
  for (const std::string& c : candidates) {
    if (stop({c})) break;
    QK_ASSIGN_OR_RETURN(double l, eval("rank", c, {c}));
    r.ranking.push_back({c, l, r.baseline_loss - l});
  }
  // Best gain first; ties keep the candidates' (topological) order.
  std::stable_sort(r.ranking.begin(), r.ranking.end(),
                   [](const RankedLayer& a, const RankedLayer& b) { return a.gain > b.gain; });

  FloatSet set;
  std::vector<std::string> added;  // in greedy order
  double current = r.baseline_loss;
  for (const RankedLayer& c : r.ranking) {
    if (within(current)) break;
    if (options.max_float_layers > 0 && static_cast<int>(set.size()) >= options.max_float_layers)
      break;
    FloatSet trial = set;
    trial.insert(c.layer);
    if (stop(trial)) break;
    QK_ASSIGN_OR_RETURN(double l, eval("greedy", c.layer, trial));
    if (l < current) {
      set = trial;
      current = l;
      added.push_back(c.layer);
      r.steps.back().accepted = true;
    }
  }
  if (within(current)) {
    // Smallest gain first: the least useful picks are the likeliest to be unneeded.
    for (auto it = added.rbegin(); it != added.rend(); ++it) {
      FloatSet trial = set;
      trial.erase(*it);
      if (stop(trial)) break;
      QK_ASSIGN_OR_RETURN(double l, eval("refine", *it, trial));
      if (within(l)) {
        set = trial;
        current = l;
        r.steps.back().accepted = true;
      }
    }
  }
  r.float_layers = set;
  r.loss = current;
  r.within_budget = within(current);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace quantkit::pipelines
