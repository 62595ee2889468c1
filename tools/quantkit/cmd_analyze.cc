// quantkit analyze MODEL --plan PLAN --data SPEC [--samples N] [--metric M] [--top K] [--layers int8|float|both]
// [--json]
#include <cstdint>
#include <cstdio>
#include <optional>

#include "analysis/float_layers.h"
#include "analysis/layer_analysis.h"
#include "analysis/plan_eval.h"
#include "analysis/simulate.h"
#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"

namespace quantkit::cli {

void SetupAnalyze(CLI::App& app, RunFn* run) {
  struct Options {
    PlanEvalArgs plan_eval;
    std::vector<std::string> metrics;
    size_t top = 20;
    bool json = false, quiet = false, no_accumulated = false;
    std::string layers = "int8";
  };
  auto opts = std::make_shared<Options>();
  opts->plan_eval.eval.samples = 256;
  CLI::App* cmd = app.add_subcommand(
      "analyze", "Per-tensor INT8 error of a plan: each quantized tensor alone and accumulated along the "
                 "graph, as SQNR/cosine/relative MSE at the tensor and at the output, saturation and "
                 "range use; ranked worst first, with the ONNX nodes that read each tensor");
  AddPlanEvalOptions(cmd, &opts->plan_eval, "data, as for calibrate (e.g. fashion-mnist:val)");
  cmd->add_option("--metric", opts->metrics, "metrics per trial (default: top1 and agreement on a [batch, classes] output, top1 only with labels; rel_mse on any other output)");
  cmd->add_option("--top", opts->top, "rows in the table (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--layers", opts->layers,
                  "int8: the quantized tensors; float: the nodes of the FP16/BF16 float part, each pinned to FP32 "
                  "in turn (which ones FP16 costs accuracy, and the --keep-fp32 fix); both")
      ->check(CLI::IsMember({"int8", "float", "both"}))
      ->capture_default_str();
  cmd->add_flag("--no-accumulated", opts->no_accumulated, "skip the accumulated (prefix) runs: half the time");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto opened = OpenPlanEvaluation(opts->plan_eval);
      if (!opened.ok()) return Report(opened.status());
      const quant::QuantPlan& plan = opened->plan;
      const analysis::PlanEvaluator& evaluator = *opened->evaluator;
      auto owned = pipelines::AnalyzeMetrics(opts->metrics, evaluator);
      if (!owned.ok()) return Report(owned.status());
      const std::vector<analysis::Metric*> metrics = analysis::MetricPointers(*owned);
      const bool int8 = opts->layers != "float", floats = opts->layers != "int8";
      const bool progress = !opts->quiet && evaluator.rank() == 0;
      std::optional<analysis::AnalyzeResult> int8_result;
      std::optional<analysis::FloatLayersResult> float_result;
      double seconds = 0;
      int64_t trials = 0;
      if (int8) {
        analysis::AnalyzeOptions options;
        options.accumulated = !opts->no_accumulated;
        options.progress = progress;
        auto r = analysis::AnalyzeLayers(evaluator, plan, metrics, options);
        if (!r.ok()) return Report(r.status());
        int8_result = std::move(*r);
        seconds += int8_result->seconds;
        trials += int8_result->trials + 1;
      }
      if (floats) {
        analysis::FloatLayersOptions options;
        options.progress = progress;
        auto r = analysis::AnalyzeFloatLayers(evaluator, plan, metrics, options);
        if (!r.ok()) return Report(r.status());
        float_result = std::move(*r);
        seconds += float_result->seconds;
        trials += float_result->trials;
      }
      // Under a launch every rank has the whole report; rank 0 prints it, each rank its line.
      if (evaluator.world_size() > 1) PrintRankLine(opened->Rank(seconds, trials));
      if (evaluator.rank() != 0) return 0;
      const analysis::AnalyzeResult* i = int8_result ? &*int8_result : nullptr;
      const analysis::FloatLayersResult* f = float_result ? &*float_result : nullptr;
      std::printf("%s", opts->json ? (analysis::AnalyzeReportJson(i, f) + "\n").c_str()
                                   : analysis::FormatAnalyzeReport(i, f, opts->top).c_str());
      return 0;
    };
  });
}

}  // namespace quantkit::cli
