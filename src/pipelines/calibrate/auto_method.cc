#include "pipelines/calibrate/auto_method.h"

#include <algorithm>

#include "common/check.h"
#include "quant/method.h"

namespace quantkit::pipelines {

Result<PerTensorChoice> ChoosePerTensor(const CalibrationSites& sites,
                                        const std::vector<quant::MethodRequest>& methods,
                                        const std::vector<quant::QuantPlan>& plans,
                                        const MethodChoice& start, PlanScore start_score,
                                        const PlanScorer& score, int max_trials,
                                        const std::function<bool()>& out_of_time) {
  QK_RETURN_IF_NOT(plans.size() == methods.size(), StatusCode::kInternal, "{} plans for {} methods",
                   plans.size(), methods.size());
  PerTensorChoice choice;
  choice.methods = start;
  choice.score = start_score;
  // Rank the activations by how far apart the methods put their ranges.
  std::vector<std::pair<double, std::string>> ranked;
  for (const std::string& tensor : sites.activations) {
    if (start.overrides.count(tensor)) continue;  // the user's choice stands
    float lo = 0, hi = 0;
    bool all = true;
    for (const quant::QuantPlan& plan : plans) {
      const quant::TensorQuant* t = plan.Find(tensor);
      if (!t || !t->quantized || t->amax.empty()) {
        all = false;
        break;
      }
      lo = lo == 0 ? t->amax.front() : std::min(lo, t->amax.front());
      hi = std::max(hi, t->amax.front());
    }
    if (all && lo > 0 && hi / lo > kAutoMinAmaxSpread) ranked.emplace_back(hi / lo, tensor);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  choice.candidates = static_cast<int>(ranked.size());
  for (const auto& [spread, tensor] : ranked) {
    const quant::MethodRequest current = MethodFor(tensor, sites, choice.methods);
    for (const quant::MethodRequest& m : methods) {
      if (m == current) continue;
      if (choice.trials >= max_trials) return choice;
      if (out_of_time && out_of_time()) {
        choice.stopped = true;
        return choice;
      }
      MethodChoice trial = choice.methods;
      trial.overrides[tensor] = m;
      QK_ASSIGN_OR_RETURN(PlanScore s, score(trial));
      ++choice.trials;
      if (s < choice.score) {
        choice.changes.push_back({tensor,
                                  quant::MethodLabel(MethodFor(tensor, sites, choice.methods)),
                                  quant::MethodLabel(m), choice.score, s});
        choice.methods = std::move(trial);
        choice.score = s;
      }
    }
  }
  return choice;
}

}  // namespace quantkit::pipelines
