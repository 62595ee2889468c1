// Small helpers shared by the subcommands: printing a Status as one line and mapping it to the
// documented exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "analysis/plan_eval.h"
#include "pipelines/plan_evaluation.h"
#include "data/image_options.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::cli {

// What a subcommand runs once its options are parsed; returns the process exit code.
using RunFn = std::function<int()>;

// Prints "quantkit: <message>" to stderr for a failed status; returns its exit code (0 if OK).
int Report(const Status& status);

// The image preprocessing options shared by calibrate, eval and data (data/image_options.h).
struct ImageArgs {
  std::string resize, crop, color, layout, mean, std;
  double scale = 0;  // 0: not given
};
void AddImageOptions(CLI::App* cmd, ImageArgs* args);
Result<data::ImageOptions> ToImageOptions(const ImageArgs& args);

// The options analyze and fallback share: MODEL, --plan, --data, --samples, --batch-size and
// --placement. `data_help` describes --data for the subcommand.
struct PlanEvalArgs {
  analysis::PlanEvalOptions eval;
  std::string plan, placement = "auto";
};
void AddPlanEvalOptions(CLI::App* cmd, PlanEvalArgs* args, const std::string& data_help);

// The shared start of analyze and fallback (pipelines/plan_evaluation.h), its warnings printed
// on stderr.
Result<pipelines::PlanEvaluation> OpenPlanEvaluation(const PlanEvalArgs& args);

}  // namespace quantkit::cli
