// quantkit fallback MODEL --plan PLAN --data SPEC --budget B [--metric M] [-o DIR] [--json]
#include <string>

#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupFallback(CLI::App& app, RunFn* run) {
  struct Options {
    FallbackOptions fallback;
    std::string metric;
    bool json = false, quiet = false;
  };
  auto opts = std::make_shared<Options>();
  FallbackOptions& f = opts->fallback;
  f.evaluation.samples = 1000;
  CLI::App* cmd = app.add_subcommand(
      "fallback",
      "Find a small set of layers to keep in float so that INT8 comes within --budget of FP32: "
      "rank layers by the accuracy each recovers alone, greedy on the ranking, then drop "
      "unneeded picks; writes the plan, the Q/DQ model and trtexec --layerPrecisions");
  AddPlanEvalOptions(cmd, &f.evaluation,
                     "evaluation data (held out from calibration, e.g. fashion-mnist:val)");
  cmd->add_option("--budget", f.budget,
                  "allowed loss vs FP32: top1/agreement in points (0.5 = 0.5%), rel_mse as a ratio")
      ->capture_default_str();
  cmd->add_option("--metric", opts->metric,
                  "top1, agreement, rel_mse (default: top1 with labels / agreement on a [batch, "
                  "classes] output, "
                  "else rel_mse)");
  cmd->add_option("--max-float", f.max_float_layers, "at most N float layers (0: no limit)");
  cmd->add_option("--float-precision", f.float_precision, "precision in --layerPrecisions")
      ->capture_default_str();
  cmd->add_option("-o,--output-dir", f.output_dir,
                  "write plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json");
  cmd->add_option_function<int64_t>(
         "--trial-cache-mb", [opts](int64_t mb) { opts->fallback.trial_cache_bytes = mb << 20; },
         "memory for cached activations trials start from (0: every trial runs the whole model; "
         "same results)")
      ->default_str(std::to_string(f.trial_cache_bytes >> 20))
      ->check(CLI::NonNegativeNumber);
  AddFloatOptions(cmd, &f.floats);
  cmd->add_flag("--json", opts->json, "print the search report as JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      FallbackOptions& f = opts->fallback;
      if (!opts->metric.empty()) f.evaluation.metrics = {opts->metric};
      f.progress = !opts->quiet;
      auto r = Fallback(f);
      if (!r.ok()) return Report(r.status());
      PrintWarnings(r->warnings);
      // Every rank took the same decisions; rank 0 wrote and prints the report, each rank its line.
      PrintRankLine(r->rank);
      if (r->rank.rank == 0) Print(opts->json ? r->json : r->text);
      // Exit 1 when the budget is out of reach, so scripts notice.
      return r->within_budget ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
