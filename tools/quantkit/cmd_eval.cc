// quantkit eval MODEL --data SPEC [--plan PLAN] [--reference FP32.onnx] [--metric M]... [--samples
// N] [--json]
#include <cstdio>
#include <optional>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupEval(CLI::App& app, RunFn* run) {
  struct Options {
    EvaluateOptions eval;
    bool json = false, quiet = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate a model (FP32, or a Q/DQ model = INT8 simulation) on data with quantkit's "
      "interpreter: top-1/top-5 with labels, agreement with --reference");
  cmd->add_option("model", opts->eval.model, "ONNX model")->required();
  cmd->add_option("--data", opts->eval.data, "data, as for calibrate (e.g. fashion-mnist:test)")
      ->required();
  cmd->add_option("--reference", opts->eval.reference_model,
                  "model to compare outputs with (e.g. the FP32 model)");
  cmd->add_option(
      "--plan", opts->eval.plan,
      "simulate this plan on MODEL (the FP32 model): plan .json, TensorRT cache, ranges .txt, "
      "or a Q/DQ .onnx (QAT) to take the scales from; compared with MODEL in FP32");
  cmd->add_option("--placement", opts->eval.placement,
                  "where --plan's Q/DQ go: auto (plan's own sites when it came from a Q/DQ model), "
                  "tensorrt, plan")
      ->capture_default_str();
  cmd->add_option(
      "--metric", opts->eval.metrics,
      "extra metrics vs the reference: top1, agreement, rel_mse, frame_agreement, decode_agreement");
  cmd->add_option("--samples", opts->eval.samples, "use the first N samples (0: all)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option("--batch-size", opts->eval.batch_size, "samples per run")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--save-predictions", opts->eval.save_predictions,
                  "write the argmax per sample as int64 .npy");
  cmd->add_option("--save-outputs", opts->eval.save_outputs,
                  "write the first output as float32 [samples, width] .npy");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &opts->eval.image);
  AddDistributedOptions(cmd, &opts->eval.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      opts->eval.progress = !opts->quiet;
      auto r = Evaluate(opts->eval);
      if (!r.ok()) return Report(r.status());
      PrintRankLine(r->rank_line);
      // Rank 0 holds the totals and prints the report (other ranks' text is empty).
      if (r->rank == 0) std::fputs((opts->json ? r->json + "\n" : r->text).c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
