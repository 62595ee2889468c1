// quantkit qat MODEL --data TRAIN -o OUT/ [--plan PLAN | --method M --calib-data D] [--steps N |
// --epochs E]
//               [--lr LR] [--optimizer adamw|sgd] [--loss mse|kl|ce|ce+kl] [--val DATA] [--resume
//               CKPT] ...
#include "cli_util.h"
#include "quantkit/qat.h"

namespace quantkit::cli {

void SetupQat(CLI::App& app, RunFn* run) {
  struct Options {
    QatOptions qat;
    std::string weights = "per-channel";
    bool frozen_weight_scales = false, quiet = false;
  };
  auto opts = std::make_shared<Options>();
  QatOptions& q = opts->qat;
  CLI::App* cmd = app.add_subcommand("qat",
                                     "Quantization-aware fine-tuning of the ONNX model itself: "
                                     "fake-quantized weights and activations "
                                     "(TensorRT placement), FP32 teacher (label-free) or labels; "
                                     "writes the fine-tuned Q/DQ model");
  cmd->add_option("model", q.model, "FP32 ONNX model")->required();
  cmd->add_option("--data", q.data, "training data, as for calibrate (e.g. fashion-mnist:train)")
      ->required();
  cmd->add_option("-o,--output", q.output_dir, "output directory")->required();
  cmd->add_option("--plan", q.plan,
                  "start from this plan (plan .json, cache, ranges .txt or Q/DQ .onnx)");
  cmd->add_option("--method", q.method, "without --plan: calibrate first with this method")
      ->capture_default_str();
  cmd->add_option("--calib-data", q.calib_data,
                  "without --plan: calibration data (default: --data)");
  cmd->add_option("--calib-samples", q.calib_samples, "calibration samples")->capture_default_str();
  cmd->add_option("--weights", opts->weights, "weight scales: per-channel | per-tensor")
      ->capture_default_str();
  cmd->add_flag(
      "--frozen-weight-scales", opts->frozen_weight_scales,
      "keep the plan's weight scales instead of recomputing them from the current weights");
  cmd->add_flag("--learn-scales,!--frozen-activation-scales", q.learn_activation_scales,
                "learn the activation scales (LSQ gradient; the default), or keep the plan's")
      ->capture_default_str();
  cmd->add_option("--steps", q.steps, "optimizer steps (overrides --epochs)");
  cmd->add_option("--epochs", q.epochs, "epochs over --data (default 1 when --steps is not given)");
  cmd->add_option("--samples", q.samples, "use the first N training samples (0: all)");
  cmd->add_option("--batch-size", q.batch_size, "samples per step")->capture_default_str();
  cmd->add_option("--lr", q.lr, "peak learning rate (linear warm-up, then cosine to 0)")
      ->capture_default_str();
  cmd->add_option("--warmup", q.warmup_steps, "warm-up steps (default: 5% of the steps)");
  cmd->add_option("--optimizer", q.optimizer, "adamw | sgd (momentum 0.9)")->capture_default_str();
  cmd->add_option("--weight-decay", q.weight_decay, "weight decay")->capture_default_str();
  cmd->add_option(
         "--loss", q.loss,
         "mse | kl (label-free distillation from the FP32 model) | ce (labels) | ce+kl | ce+mse")
      ->capture_default_str();
  cmd->add_option("--temperature", q.temperature, "KL temperature")->capture_default_str();
  cmd->add_option("--labels", q.labels,
                  "labels .npy (int [N]) for training data that carries none");
  cmd->add_option("--feature", q.feature_tensors,
                  "add an intermediate-feature MSE on this tensor (repeatable)");
  cmd->add_option("--feature-weight", q.feature_weight, "weight of the feature MSE")
      ->capture_default_str();
  cmd->add_option("--seed", q.seed, "shuffling seed")->capture_default_str();
  cmd->add_option("--val", q.val,
                  "validation data: top-1 (labels) or agreement with FP32; keeps the best");
  cmd->add_option("--val-samples", q.val_samples, "use the first N validation samples (0: all)");
  cmd->add_option("--eval-every", q.eval_every, "validate every N steps (default: once per epoch)");
  cmd->add_option("--resume", q.resume,
                  "continue from a checkpoint (OUT/checkpoint.pt of an earlier run)");
  cmd->add_option(
      "--stop-after", q.stop_after,
      "stop after N steps of this run and write only the checkpoint (continue with --resume)");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &q.image);
  AddDistributedOptions(cmd, &q.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      QatOptions& q = opts->qat;
      if (opts->weights != "per-channel" && opts->weights != "per-tensor") {
        return Report(
            Status(StatusCode::kInvalidArgument, "--weights must be per-channel or per-tensor"));
      }
      q.placement.per_channel_weights = opts->weights == "per-channel";
      q.recompute_weight_scales = !opts->frozen_weight_scales;
      q.progress = !opts->quiet;
      auto r = Qat(q);
      if (!r.ok()) return Report(r.status());
      PrintRankLine(r->rank);
      if (r->rank.rank == 0) Print(r->text);  // rank 0 wrote and reports
      return 0;
    };
  });
}

}  // namespace quantkit::cli
