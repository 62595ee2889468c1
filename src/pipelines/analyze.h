// `quantkit analyze` (and the public Analyze): the plan evaluation opened, the metrics chosen
// (pipelines/plan_evaluation.h AnalyzeMetrics), every quantized tensor ranked by the error it
// causes (analysis/layer_analysis.h), and the reports. Under a launch every rank gets the whole
// result; rank 0's report is the one to print.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/layer_analysis.h"
#include "distributed/launch.h"
#include "pipelines/plan_evaluation.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct AnalyzeRequest {
  PlanEvaluationRequest evaluation;
  std::vector<std::string> metrics;  // empty: AnalyzeMetrics' default for the data and output
  bool accumulated = true;           // the prefix runs (half the time)
  bool progress = true;
  size_t top = 20;  // rows of the text table (0: all)
};

struct AnalyzeRun {
  analysis::AnalyzeResult result;
  std::vector<std::string> warnings;  // rank 0's: plan tensors matching no model tensor
  std::string text;                   // the ranked table (`top` rows)
  std::string json;                   // every row
  distributed::RankReport rank;
};

Result<AnalyzeRun> Analyze(const AnalyzeRequest& request);

}  // namespace quantkit::pipelines
