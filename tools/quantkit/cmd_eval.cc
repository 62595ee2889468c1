// quantkit eval MODEL --data SPEC [--plan PLAN] [--reference FP32.onnx] [--metric M]... [--samples N] [--json]
#include <cstdio>

#include <nlohmann/json.hpp>

#include "pipelines/evaluate.h"
#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"

namespace quantkit::cli {

void SetupEval(CLI::App& app, RunFn* run) {
  struct Options {
    pipelines::EvalOptions eval;
    bool json = false, quiet = false;
    std::string placement = "auto";
    std::vector<std::string> metric_names;
    ImageArgs image;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Evaluate a model (FP32, or a Q/DQ model = INT8 simulation) on data with quantkit's "
              "interpreter: top-1/top-5 with labels, agreement with --reference");
  cmd->add_option("model", opts->eval.model, "ONNX model")->required();
  cmd->add_option("--data", opts->eval.data, "data, as for calibrate (e.g. fashion-mnist:test)")->required();
  cmd->add_option("--reference", opts->eval.reference_model, "model to compare outputs with (e.g. the FP32 model)");
  cmd->add_option("--plan", opts->eval.plan,
                  "simulate this plan on MODEL (the FP32 model): plan .json, TensorRT cache, ranges .txt, "
                  "or a Q/DQ .onnx (QAT) to take the scales from; compared with MODEL in FP32");
  cmd->add_option("--placement", opts->placement,
                  "where --plan's Q/DQ go: auto (plan's own sites when it came from a Q/DQ model), "
                  "tensorrt, plan")->capture_default_str();
  cmd->add_option("--metric", opts->metric_names, "extra metrics vs the reference: top1, agreement, rel_mse");
  cmd->add_option("--samples", opts->eval.samples, "use the first N samples (0: all)")->transform(InRange(0, kMaxCount));
  cmd->add_option("--batch-size", opts->eval.batch_size, "samples per run")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--save-predictions", opts->eval.save_predictions, "write the argmax per sample as int64 .npy");
  cmd->add_option("--save-outputs", opts->eval.save_outputs, "write the first output as float32 [samples, width] .npy");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &opts->image);
  AddDistributedOptions(cmd, &opts->eval.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto image = ToImageOptions(opts->image);
      if (!image.ok()) return Report(image.status());
      opts->eval.image = *image;
      opts->eval.progress = !opts->quiet;
      auto mode = passes::ParsePlacementPolicy(opts->placement);
      if (!mode.ok()) return Report(mode.status());
      opts->eval.simulation.mode = *mode;
      auto metrics = analysis::MakeMetrics(opts->metric_names);
      if (!metrics.ok()) return Report(metrics.status());
      opts->eval.metrics = analysis::MetricPointers(*metrics);
      auto r = pipelines::Evaluate(opts->eval);
      if (!r.ok()) return Report(r.status());
      if (r->rank.world_size > 1) PrintRankLine(r->rank);
      if (r->rank.rank != 0) return 0;  // rank 0 holds the totals and prints the report
      if (opts->json) {
        nlohmann::json j{{"samples", r->samples}, {"seconds", r->seconds}, {"model_seconds", r->model_seconds}};
        if (r->agreement) j["reference_seconds"] = r->reference_seconds;
        if (r->top1) j["top1"] = *r->top1, j["top5"] = *r->top5;
        if (r->agreement) {
          j["agreement"] = {{"argmax", r->agreement->argmax_agreement}, {"cosine", r->agreement->cosine},
                            {"sqnr_db", r->agreement->sqnr_db}, {"max_abs_error", r->agreement->max_abs_error}};
        }
        if (!r->metrics.empty()) j["metrics"] = r->metrics;
        if (!opts->eval.plan.empty()) j["plan"] = opts->eval.plan;
        std::printf("%s\n", j.dump(1).c_str());
      } else {
        std::fputs(pipelines::FormatEval(opts->eval, *r).c_str(), stdout);
      }
      return 0;
    };
  });
}

}  // namespace quantkit::cli
