// The shared start of the plan-vs-FP32 workflows (analyze, fallback, the public API): the plan
// read from any format the hub knows, the evaluator (data and FP32 outputs cached once), and a
// warning when quantized plan tensors match no tensor of the model. Returns the warnings; the
// caller decides where they go (the CLI prints them on stderr).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "analysis/plan_eval.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct PlanEvaluation {
  quant::QuantPlan plan;
  std::unique_ptr<analysis::PlanEvaluator> evaluator;
  std::vector<std::string> warnings;
};

// `placement`: "auto" | "tensorrt" | "plan".
Result<PlanEvaluation> OpenPlanEvaluation(const analysis::PlanEvalOptions& options, const std::string& plan_path,
                                          const std::string& placement);

}  // namespace quantkit::pipelines
