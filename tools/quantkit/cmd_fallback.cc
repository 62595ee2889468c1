// quantkit fallback MODEL --plan PLAN --data SPEC --budget B [--metric M] [-o DIR] [--json]
#include <cstdio>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupFallback(CLI::App& app, RunFn* run) {
  struct Options {
    FallbackOptions fallback;
    std::string metric;
    bool json = false, quiet = false;
  };
  auto opts = std::make_shared<Options>();
  opts->fallback.evaluation.samples = 1000;
  CLI::App* cmd = app.add_subcommand(
      "fallback",
      "Find a small set of layers to keep in float so that INT8 comes within --budget of FP32: "
      "rank layers by the accuracy each recovers alone, greedy on the ranking, then drop "
      "unneeded picks; writes the plan, the Q/DQ model and trtexec --layerPrecisions");
  AddPlanEvalOptions(cmd, &opts->fallback.evaluation,
                     "evaluation data (held out from calibration, e.g. fashion-mnist:val)");
  cmd->add_option("--budget", opts->fallback.budget,
                  "allowed loss vs FP32: top1/agreement in points (0.5 = 0.5%), rel_mse as a ratio")
      ->transform(InRange(0, kMaxBudget))
      ->capture_default_str();
  cmd->add_option(
      "--metric", opts->metric,
      "top1, agreement, rel_mse, frame_agreement, decode_agreement (default: top1 with labels / agreement on a [batch, classes] output, else rel_mse)");
  cmd->add_option("--max-float", opts->fallback.max_float_layers,
                  "at most N float layers (0: no limit)")
      ->transform(InRange(0, kMaxIntCount));
  cmd->add_option("--float-precision", opts->fallback.float_precision,
                  "precision in --layerPrecisions")
      ->check(CLI::IsMember({"fp16", "fp32"}))
      ->capture_default_str();
  cmd->add_option("-o,--output-dir", opts->fallback.output_dir,
                  "write plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json");
  cmd->add_option(
         "--trial-cache-mb", opts->fallback.trial_cache_mib,
         "memory for cached activations trials start from (0: every trial runs the whole model; same results)")
      ->transform(InRange(0, kMaxTrialCacheMb))
      ->capture_default_str();
  AddFloatOptions(cmd, &opts->fallback.floats);
  cmd->add_flag("--json", opts->json, "print the search report as JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      if (!opts->metric.empty()) opts->fallback.evaluation.metrics = {opts->metric};
      opts->fallback.progress = !opts->quiet;
      auto r = Fallback(opts->fallback);
      if (!r.ok()) return Report(r.status());
      if (r->rank == 0) PrintWarnings(r->warnings);
      // Every rank took the same decisions; rank 0 wrote and prints the report, each rank its line.
      PrintRankLine(r->rank_line);
      if (r->rank == 0) std::fputs((opts->json ? r->json + "\n" : r->text).c_str(), stdout);
      // Exit 1 when the budget is out of reach, so scripts notice.
      return r->within_budget ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
