// quantkit analyze MODEL --plan PLAN --data SPEC [--samples N] [--metric M] [--top K] [--json]
#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupAnalyze(CLI::App& app, RunFn* run) {
  struct Options {
    AnalyzeOptions analyze;
    bool json = false, quiet = false, no_accumulated = false;
  };
  auto opts = std::make_shared<Options>();
  AnalyzeOptions& a = opts->analyze;
  a.evaluation.samples = 256;
  a.top = 20;
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Per-tensor INT8 error of a plan: each quantized tensor alone and accumulated along the "
      "graph, as SQNR/cosine/relative MSE at the tensor and at the output, saturation and "
      "range use; ranked worst first, with the ONNX nodes that read each tensor");
  AddPlanEvalOptions(cmd, &a.evaluation, "data, as for calibrate (e.g. fashion-mnist:val)");
  cmd->add_option(
      "--metric", a.evaluation.metrics,
      "metrics per trial (default: top1 and agreement on a [batch, classes] output, top1 only with "
      "labels; rel_mse on any other output)");
  cmd->add_option("--top", a.top, "rows in the table (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-accumulated", opts->no_accumulated,
                "skip the accumulated (prefix) runs: half the time");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      opts->analyze.accumulated = !opts->no_accumulated;
      opts->analyze.progress = !opts->quiet;
      auto r = Analyze(opts->analyze);
      if (!r.ok()) return Report(r.status());
      PrintWarnings(r->warnings);
      // Under a launch every rank has the whole report; rank 0 prints it, each rank its line.
      PrintRankLine(r->rank);
      if (r->rank.rank != 0) return 0;
      Print(opts->json ? r->json : r->text);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
