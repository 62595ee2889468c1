// quantkit analyze MODEL --plan PLAN --data SPEC [--samples N] [--metric M] [--top K] [--layers
// int8|float|both]
// [--json]
#include <cstdio>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupAnalyze(CLI::App& app, RunFn* run) {
  struct Options {
    AnalyzeOptions analyze;
    bool json = false, quiet = false, no_accumulated = false;
  };
  auto opts = std::make_shared<Options>();
  opts->analyze.top = 20;
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Per-tensor INT8 error of a plan: each quantized tensor alone and accumulated along the "
      "graph, as SQNR/cosine/relative MSE at the tensor and at the output, saturation and "
      "range use; ranked worst first, with the ONNX nodes that read each tensor");
  AddPlanEvalOptions(cmd, &opts->analyze.evaluation,
                     "data, as for calibrate (e.g. fashion-mnist:val)");
  cmd->add_option(
      "--metric", opts->analyze.evaluation.metrics,
      "metrics per trial (default: top1 and agreement on a [batch, classes] output, top1 only with labels; rel_mse on any other output)");
  cmd->add_option("--top", opts->analyze.top, "rows in the table (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option(
         "--layers", opts->analyze.layers,
         "int8: the quantized tensors; float: the nodes of the FP16/BF16 float part, each pinned to FP32 "
         "in turn (which ones FP16 costs accuracy, and the --keep-fp32 fix); both")
      ->check(CLI::IsMember({"int8", "float", "both"}))
      ->capture_default_str();
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
      if (r->rank == 0) PrintWarnings(r->warnings);
      // Under a launch every rank has the whole report; rank 0 prints it, each rank its line.
      PrintRankLine(r->rank_line);
      if (r->rank == 0) std::fputs((opts->json ? r->json + "\n" : r->text).c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
