#include "pipelines/plan_evaluation.h"

#include <fmt/format.h>

#include "analysis/simulate.h"
#include "common/check.h"

namespace quantkit::pipelines {

Result<PlanEvaluation> OpenPlanEvaluation(
    const analysis::PlanEvalOptions& options, const std::string& plan_path,
    const std::string& placement,
    const std::optional<distributed::DistributedOptions>& distributed) {
  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, analysis::ReadPlanFile(plan_path));
  return OpenPlanEvaluation(options, std::move(plan), placement, distributed);
}

Result<PlanEvaluation> OpenPlanEvaluation(
    const analysis::PlanEvalOptions& options, quant::QuantPlan plan, const std::string& placement,
    const std::optional<distributed::DistributedOptions>& distributed) {
  analysis::PlanEvalOptions eval = options;
  QK_RETURN_IF_ERROR(analysis::CheckPlanFloatModel(plan, eval.model));
  QK_ASSIGN_OR_RETURN(eval.simulation.mode, passes::ParsePlacementPolicy(placement));
  PlanEvaluation r;
  r.plan = std::move(plan);
  if (distributed) {
    QK_ASSIGN_OR_RETURN(r.comm, distributed::OpenCommunicator(*distributed));
    eval.comm = r.comm.get();
  }
  QK_ASSIGN_OR_RETURN(r.evaluator, analysis::PlanEvaluator::Create(eval));
  QK_ASSIGN_OR_RETURN(
      std::vector<std::string> unmatched,
      analysis::UnmatchedPlanTensors(*r.evaluator->float_model().graph, r.plan, eval.model));
  if (!unmatched.empty() && r.evaluator->rank() == 0) {
    r.warnings.push_back(fmt::format("{} quantized plan tensors match no tensor of {} (e.g. '{}')",
                                     unmatched.size(), eval.model, unmatched.front()));
  }
  return r;
}

distributed::RankReport PlanEvaluation::Rank(double work_seconds, int64_t passes) const {
  distributed::RankReport report;
  report.rank = evaluator->rank();
  report.world_size = evaluator->world_size();
  report.shard = evaluator->shard();
  report.work_seconds = work_seconds;
  report.passes = passes;
  return report;
}

Result<std::vector<std::unique_ptr<analysis::Metric>>> AnalyzeMetrics(
    std::vector<std::string> given, const analysis::PlanEvaluator& evaluator) {
  if (given.empty()) {
    given.push_back(analysis::DefaultMetricName(evaluator.has_labels(), evaluator.class_output()));
    if (given.front() == "top1") given.push_back("agreement");  // rel_mse stands alone
  }
  return analysis::MakeMetrics(given);
}

Result<std::unique_ptr<analysis::Metric>> FallbackMetric(const std::string& given,
                                                         const analysis::PlanEvaluator& evaluator) {
  return analysis::MakeOutputAwareMetric(given, evaluator.has_labels(), evaluator.class_output());
}

}  // namespace quantkit::pipelines
