// quantkit fallback MODEL --plan PLAN --data SPEC --budget B [--metric M] [-o DIR] [--json]
#include <cstdio>

#include "pipelines/fallback.h"
#include "analysis/plan_eval.h"
#include "analysis/simulate.h"
#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"

namespace quantkit::cli {

void SetupFallback(CLI::App& app, RunFn* run) {
  struct Options {
    PlanEvalArgs plan_eval;
    pipelines::FallbackOptions fallback;
    std::string metric;
    bool json = false, quiet = false;
    FloatArgs floats;
  };
  auto opts = std::make_shared<Options>();
  opts->plan_eval.eval.samples = 1000;
  CLI::App* cmd = app.add_subcommand(
      "fallback", "Find a small set of layers to keep in float so that INT8 comes within --budget of FP32: "
                  "rank layers by the accuracy each recovers alone, greedy on the ranking, then drop "
                  "unneeded picks; writes the plan, the Q/DQ model and trtexec --layerPrecisions");
  AddPlanEvalOptions(cmd, &opts->plan_eval,
                     "evaluation data (held out from calibration, e.g. fashion-mnist:val)");
  cmd->add_option("--budget", opts->fallback.budget,
                  "allowed loss vs FP32: top1/agreement in points (0.5 = 0.5%), rel_mse as a ratio")
      ->transform(InRange(0, kMaxBudget))
      ->capture_default_str();
  cmd->add_option("--metric", opts->metric, "top1, agreement, rel_mse (default: top1 with labels / agreement on a [batch, classes] output, else rel_mse)");
  cmd->add_option("--max-float", opts->fallback.max_float_layers, "at most N float layers (0: no limit)")->transform(InRange(0, kMaxIntCount));
  cmd->add_option("--float-precision", opts->fallback.float_precision, "precision in --layerPrecisions")
      ->capture_default_str();
  cmd->add_option("-o,--output-dir", opts->fallback.output_dir,
                  "write plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json");
  cmd->add_option_function<int64_t>(
         "--trial-cache-mb", [opts](int64_t mb) { opts->fallback.trial_cache_bytes = mb << 20; },
         "memory for cached activations trials start from (0: every trial runs the whole model; same results)")
      ->default_str(std::to_string(analysis::kDefaultPrefixCacheBytes >> 20))
      ->transform(InRange(0, kMaxTrialCacheMb));
  AddFloatOptions(cmd, &opts->floats);
  cmd->add_flag("--json", opts->json, "print the search report as JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto opened = OpenPlanEvaluation(opts->plan_eval);
      if (!opened.ok()) return Report(opened.status());
      const quant::QuantPlan& plan = opened->plan;
      const analysis::PlanEvaluator& evaluator = *opened->evaluator;
      auto metric = pipelines::FallbackMetric(opts->metric, evaluator);
      if (!metric.ok()) return Report(metric.status());
      opts->fallback.progress = !opts->quiet;
      auto floats = ToFloatOverride(opts->floats);
      if (!floats.ok()) return Report(floats.status());
      opts->fallback.floats = *floats;
      auto storage = passes::ParseWeightStorage(opts->floats.weight_storage);
      if (!storage.ok()) return Report(storage.status());
      opts->fallback.weight_storage = *storage;
      auto r = pipelines::RunFallback(evaluator, plan, metric->get(), opts->fallback);
      if (!r.ok()) return Report(r.status());
      // Every rank took the same decisions; rank 0 wrote and prints the report, each rank its line.
      if (evaluator.world_size() > 1) {
        PrintRankLine(opened->Rank(r->search.seconds + r->full_eval_seconds, r->search.evaluations + 1));
      }
      if (evaluator.rank() != 0) return r->search.within_budget ? 0 : 1;
      if (opts->json) {
        std::printf("%s\n", pipelines::FallbackJson(*r).c_str());
      } else {
        std::fputs(pipelines::FormatFallback(*r).c_str(), stdout);
      }
      // Exit 1 when the budget is out of reach, so scripts notice.
      return r->search.within_budget ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
