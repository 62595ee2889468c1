// quantkit's public QAT entry point: the whole of `quantkit qat` in one call (docs/qat.md).
//
//   plan (`plan`, or calibrated first) -> BatchNormalization folded -> the Q/DQ model calibrate
//   writes, its pairs as fake quantization -> training steps against the FP32 teacher (label-free)
//   and/or labels -> validation and keep-the-best -> output_dir: model.qdq.onnx, model.float.onnx,
//   calib.cache, plan.json, training_log.json, training.svg, summary.txt, checkpoint.npz.
//
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/calibration.h"
#include "quantkit/status.h"

namespace quantkit {

struct QatOptions {
  std::string model;  // the FP32 ONNX model
  // The model to distil from and validate against (empty: `model`). Give the original when
  // `model` is calibrate's model.float.onnx from PTQ stages that change the float function
  // (bias-correction, adaround, seqmse): that file is not the FP32 model's function.
  std::string teacher;
  std::string data;        // training data (a data spec, as calibrate's)
  std::string output_dir;  // required
  ImagePreprocessing image;
  std::string labels;   // labels .npy (int [N]) for training data that carries none
  int64_t samples = 0;  // the first N training samples (0: all)
  // The start: a plan (.json, cache, ranges .txt or Q/DQ .onnx), or calibrated first with
  // `method` on `calib_data` (default: `data`), its first `calib_samples`.
  std::string plan;
  std::string method = "max";
  std::string calib_data;
  int64_t calib_samples = 1024;
  std::string weights = "per-channel";  // weight scales: per-channel | per-tensor
  bool frozen_weight_scales = false;    // keep the plan's instead of recomputing them every step
  bool learn_activation_scales = true;  // LSQ; false keeps the plan's
  int64_t steps = 0, epochs = 0;        // steps overrides epochs; both 0: one epoch
  int64_t batch_size = 64;              // the global batch (split over the ranks of a launch)
  // Peak learning rate (linear warm-up, then cosine to 0). 0 (the default): chosen on the
  // validation data among 1e-5 .. 1e-3 by five short trial runs when the run is validated, else
  // kDefaultLr; a resumed run continues at its checkpoint's. lr_auto: always chosen (an error
  // without validation data).
  static constexpr double kDefaultLr = 1e-4;
  // Bounds checked here and read by the CLI: learning rates and loss weights beyond them only make
  // the loss overflow; a KL temperature near 0 divides the logits by ~0 (NaN losses).
  static constexpr double kMaxLr = 10;
  static constexpr double kMinTemperature = 0.05, kMaxTemperature = 100;
  static constexpr double kMaxLossWeight = 1e6;
  double lr = 0;
  bool lr_auto = false;
  int64_t warmup_steps = 0;         // 0: 5% of the steps
  std::string optimizer = "adamw";  // adamw | sgd (momentum 0.9)
  double weight_decay = 0;
  std::string loss = "mse";           // mse | kl (label-free) | ce (labels) | ce+kl | ce+mse
  double temperature = 1;             // kl
  std::vector<std::string> features;  // intermediate tensors with an MSE to the teacher's
  double feature_weight = 0;          // 0 with features: 1
  uint64_t seed = 0;                  // of the batch order
  // Validation: `val` (its first val_samples), else the last `holdout` samples of `data`
  // (-1: 10%, at most 1000, when a batch is left; 0: none); `metric` empty: by the output.
  std::string val;
  int64_t val_samples = 0;
  int64_t holdout = -1;
  std::string metric;
  int64_t eval_every = 0;  // steps between validations (0: once per epoch)
  std::string resume;      // a checkpoint.npz to continue
  int64_t stop_after = 0;  // > 0: stop after N steps of this run, write only the checkpoint
  // The written model's float part (all of dtype, cast_io, keep_fp32 unset: the plan's own).
  FloatPart floats;
  bool progress = false;  // a bar on stderr when it is a terminal
  DistributedChoices distributed;
};

struct QatReport {
  std::string summary;                // summary.txt
  std::vector<std::string> warnings;  // e.g. no step beat the PTQ start (the PTQ model was written)
  std::vector<std::string> written;
  std::string metric;                       // the validation metric ("" when not validated)
  std::optional<double> val_ptq, val_best;  // the metric before training and of the kept step
  int64_t best_step = 0, steps = 0;
  double lr = 0;        // the peak lr used (chosen, given, the default or the checkpoint's)
  bool paused = false;  // stopped by stop_after: only the checkpoint was written
  double seconds = 0;
  int64_t peak_rss_bytes = 0;
  std::string footer;  // the time, peak memory and the files written
  std::string text;    // what `quantkit qat` prints on stdout: summary + footer; empty on ranks > 0
  int rank = 0, world_size = 1;
  std::string rank_line;
};

Result<QatReport> Qat(const QatOptions& options);

}  // namespace quantkit
