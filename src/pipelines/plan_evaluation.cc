#include "pipelines/plan_evaluation.h"

#include <fmt/format.h>

#include "analysis/simulate.h"
#include "common/check.h"

namespace quantkit::pipelines {

Result<PlanEvaluation> OpenPlanEvaluation(const analysis::PlanEvalOptions& options, const std::string& plan_path,
                                          const std::string& placement) {
  analysis::PlanEvalOptions eval = options;
  QK_ASSIGN_OR_RETURN(eval.simulation.mode, passes::ParsePlacementPolicy(placement));
  PlanEvaluation r;
  QK_ASSIGN_OR_RETURN(r.plan, analysis::ReadPlanFile(plan_path));
  QK_ASSIGN_OR_RETURN(r.evaluator, analysis::PlanEvaluator::Create(eval));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> unmatched,
                      analysis::UnmatchedPlanTensors(*r.evaluator->float_model().graph, r.plan, eval.model));
  if (!unmatched.empty()) {
    r.warnings.push_back(fmt::format("{} quantized plan tensors match no tensor of {} (e.g. '{}')",
                                     unmatched.size(), eval.model, unmatched.front()));
  }
  return r;
}

}  // namespace quantkit::pipelines
