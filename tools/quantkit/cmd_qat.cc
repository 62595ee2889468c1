// quantkit qat MODEL --data TRAIN -o OUT/ [--plan PLAN | --method M --calib-data D] [--steps N |
// --epochs E]
//               [--lr LR] [--optimizer adamw|sgd] [--loss mse|kl|ce|ce+kl] [--val DATA | --holdout
//               N] [--metric M] [--resume CKPT] ...
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/qat.h"

namespace quantkit::cli {

void SetupQat(CLI::App& app, RunFn* run) {
  struct Options {
    QatOptions qat;
    bool quiet = false;
  };
  auto opts = std::make_shared<Options>();
  QatOptions& q = opts->qat;
  CLI::App* cmd = app.add_subcommand(
      "qat",
      "Quantization-aware fine-tuning of the ONNX model itself: fake-quantized weights and activations "
      "(TensorRT placement), FP32 teacher (label-free) or labels; writes the fine-tuned Q/DQ model");
  cmd->add_option("model", q.model, "FP32 ONNX model")->required();
  cmd->add_option("--data", q.data, "training data, as for calibrate (e.g. fashion-mnist:train)")
      ->required();
  cmd->add_option("-o,--output", q.output_dir, "output directory")->required();
  cmd->add_option("--plan", q.plan,
                  "start from this plan (plan .json, cache, ranges .txt or Q/DQ .onnx)");
  cmd->add_option(
      "--teacher", q.teacher,
      "the FP32 model to distil from and validate against (default: MODEL); give the original when "
      "MODEL is calibrate's model.float.onnx from --ptq stages that change weights");
  cmd->add_option("--method", q.method, "without --plan: calibrate first with this method")
      ->capture_default_str();
  cmd->add_option("--calib-data", q.calib_data,
                  "without --plan: calibration data (default: --data)");
  cmd->add_option("--calib-samples", q.calib_samples, "calibration samples")
      ->transform(InRange(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--weights", q.weights, "weight scales: per-channel | per-tensor")
      ->capture_default_str();
  cmd->add_flag(
      "--frozen-weight-scales", q.frozen_weight_scales,
      "keep the plan's weight scales instead of recomputing them from the current weights");
  cmd->add_flag("--learn-scales,!--frozen-activation-scales", q.learn_activation_scales,
                "learn the activation scales (LSQ gradient; the default), or keep the plan's")
      ->capture_default_str();
  cmd->add_option("--steps", q.steps, "optimizer steps (overrides --epochs)")
      ->transform(InRange(0, kMaxQatSteps));
  cmd->add_option("--epochs", q.epochs, "epochs over --data (default 1 when --steps is not given)")
      ->transform(InRange(0, kMaxQatEpochs));
  cmd->add_option("--samples", q.samples, "use the first N training samples (0: all)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option("--batch-size", q.batch_size, "samples per step")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  // A number, or auto: not a numeric option for CLI11, so the range is checked here.
  const CLI::Validator lr_range = AboveAndAtMost(0, kMaxLearningRate);
  cmd->add_option_function<std::string>(
         "--lr",
         [&q](const std::string& v) {
           q.lr_auto = v == "auto";
           if (!q.lr_auto)
             q.lr = std::strtod(v.c_str(), nullptr);  // range-checked by the validator below
         },
         fmt::format(
             "peak learning rate (linear warm-up, then cosine to 0), or auto: chosen on the validation data "
             "among 1e-5, 3e-5, 1e-4, 3e-4, 1e-3 by short trial runs (a quarter of the run's steps more; 3e-6 and 1e-6 too "
             "when none beats the PTQ start). "
             "Default: auto when the run is validated (--val or the held-out tail), else {:g}; with --resume "
             "the checkpoint's",
             QatOptions::kDefaultLr))
      ->check(CLI::Validator(
          [lr_range](std::string& v) { return v == "auto" ? std::string() : lr_range(v); },
          fmt::format("auto | FLOAT in (0, {:g}]", kMaxLearningRate)));
  cmd->add_option("--warmup", q.warmup_steps, "warm-up steps (default: 5% of the steps)")
      ->transform(InRange(0, kMaxQatSteps));
  cmd->add_option("--optimizer", q.optimizer, "adamw | sgd (momentum 0.9)")->capture_default_str();
  cmd->add_option("--weight-decay", q.weight_decay, "weight decay")
      ->transform(InRange(0, 1))
      ->capture_default_str();
  cmd->add_option(
         "--loss", q.loss,
         "mse | kl (label-free distillation from the FP32 model; kl on a Softmax output: its logits) | ce (labels) | "
         "ce+kl | ce+mse")
      ->capture_default_str();
  cmd->add_option("--temperature", q.temperature, "KL temperature")
      ->transform(InRange(kMinTemperature, kMaxTemperature))
      ->capture_default_str();
  cmd->add_option("--labels", q.labels,
                  "labels .npy (int [N]) for training data that carries none");
  cmd->add_option("--feature", q.features,
                  "add an intermediate-feature MSE on this tensor (repeatable)");
  cmd->add_option("--feature-weight", q.feature_weight, "weight of the feature MSE")
      ->transform(InRange(0, kMaxLossWeight))
      ->capture_default_str();
  cmd->add_option("--seed", q.seed, "shuffling seed")
      ->transform(InRange(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option(
      "--val", q.val,
      "validation data (default: a held-out tail of --data, see --holdout); keeps the best step, "
      "the PTQ start included");
  cmd->add_option("--val-samples", q.val_samples, "use the first N validation samples (0: all)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option(
         "--holdout", q.holdout,
         "without --val: validate on the last N samples of --data, not trained on (default: 10%, at most "
         "1000, when a batch is left; 0: no validation)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option(
      "--metric", q.metric,
      "validation metric: top1, agreement, rel_mse, frame_agreement, decode_agreement (default: top1 with labels / agreement on a "
      "[batch, classes] output, else rel_mse; ties on top1/agreement broken by rel_mse vs FP32)");
  cmd->add_option("--eval-every", q.eval_every, "validate every N steps (default: once per epoch)")
      ->transform(InRange(0, kMaxQatSteps));
  cmd->add_option("--resume", q.resume,
                  "continue from a checkpoint (OUT/checkpoint.npz of an earlier run)");
  cmd->add_option(
         "--stop-after", q.stop_after,
         "stop after N steps of this run and write only the checkpoint (continue with --resume)")
      ->transform(InRange(0, kMaxQatSteps));
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &q.image);
  AddFloatOptions(cmd, &q.floats);
  AddDistributedOptions(cmd, &q.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      QatOptions& q = opts->qat;
      q.progress = !opts->quiet;
      auto r = Qat(q);
      if (!r.ok()) return Report(r.status());
      PrintRankLine(r->rank_line);
      if (r->rank != 0) return 0;  // rank 0 wrote and reports
      // The warnings go to stderr between the summary and the footer (loud where stdout is a log).
      std::fputs(r->summary.c_str(), stdout);
      for (const std::string& w : r->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      std::fputs(r->footer.c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
