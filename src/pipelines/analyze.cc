#include "pipelines/analyze.h"

#include "common/check.h"

namespace quantkit::pipelines {

Result<AnalyzeRun> Analyze(const AnalyzeRequest& request) {
  QK_ASSIGN_OR_RETURN(PlanEvaluation opened, OpenPlanEvaluation(request.evaluation));
  const analysis::PlanEvaluator& evaluator = *opened.evaluator;
  QK_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<analysis::Metric>> owned,
                      AnalyzeMetrics(request.metrics, evaluator));
  analysis::AnalyzeOptions options;
  options.accumulated = request.accumulated;
  options.progress = request.progress && evaluator.rank() == 0;
  AnalyzeRun run;
  QK_ASSIGN_OR_RETURN(
      run.result,
      analysis::AnalyzeLayers(evaluator, opened.plan, analysis::MetricPointers(owned), options));
  run.warnings = std::move(opened.warnings);
  run.rank = opened.Rank(run.result.seconds, run.result.trials + 1);
  run.text =
      analysis::FormatAnalyzeTable(run.result, request.top ? request.top : run.result.rows.size());
  run.json = analysis::AnalyzeJson(run.result) + "\n";
  return run;
}

}  // namespace quantkit::pipelines
