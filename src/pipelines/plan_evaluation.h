// The shared start of the plan-vs-FP32 workflows (analyze, fallback, the public API): the plan
// read from any format the hub knows, the evaluator (data and FP32 outputs cached once), and a
// warning when quantized plan tensors match no tensor of the model. Returns the warnings; the
// caller decides where they go (the CLI prints them on stderr).
//
// With `distributed` (the CLI's analyze and fallback) a torchrun/srun/PyTorchJob launch is joined
// and each rank evaluates its shard (analysis/plan_eval.h); without it, one process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "distributed/launch.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct PlanEvaluation {
  std::unique_ptr<distributed::Communicator>
      comm;  // declared first: outlives the evaluator using it
  quant::QuantPlan plan;
  std::unique_ptr<analysis::PlanEvaluator> evaluator;
  std::vector<std::string> warnings;  // rank 0's only: one copy per job

  // This rank's summary line: `passes` runs over its shard in `work_seconds`.
  distributed::RankReport Rank(double work_seconds, int64_t passes) const;
};

// `placement`: "auto" | "tensorrt" | "plan".
Result<PlanEvaluation> OpenPlanEvaluation(
    const analysis::PlanEvalOptions& options, const std::string& plan_path,
    const std::string& placement,
    const std::optional<distributed::DistributedOptions>& distributed = std::nullopt);
// The same for a plan already in memory (the public API's and Python's plans).
Result<PlanEvaluation> OpenPlanEvaluation(
    const analysis::PlanEvalOptions& options, quant::QuantPlan plan, const std::string& placement,
    const std::optional<distributed::DistributedOptions>& distributed = std::nullopt);

// The metrics analyze ranks by: `given`, else analysis::DefaultMetricName for the evaluator's data
// and output, with argmax agreement beside top-1 on a class vector. The one rule of the CLI, the
// Python module and the public API.
Result<std::vector<std::unique_ptr<analysis::Metric>>> AnalyzeMetrics(
    std::vector<std::string> given, const analysis::PlanEvaluator& evaluator);

// The one metric a fallback search optimizes: `given`, or the default when it is empty.
Result<std::unique_ptr<analysis::Metric>> FallbackMetric(const std::string& given,
                                                         const analysis::PlanEvaluator& evaluator);

}  // namespace quantkit::pipelines
