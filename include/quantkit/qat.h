// quantkit's public quantization-aware training: `quantkit qat` in one call (docs/qat.md).
//
//   plan (`plan`, or calibrate first)  ->  BatchNormalization folded into its Conv (frozen stats)
//   -> the Q/DQ model calibrate exports (TensorRT placement) -> a training graph of fake-quantized
//   weights and activations -> optimizer steps on shuffled batches, the FP32 model as teacher
//   (label-free distillation by default; cross-entropy with labels) -> per-epoch validation with
//   keep-the-best, checkpoints (`resume`)
//   -> OUT/model.qdq.onnx, model.float.onnx, calib.cache, plan.json, training_log.json,
//      training.svg, summary.txt (one set: all or none), OUT/checkpoint.pt
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/calibration.h"
#include "quantkit/options.h"
#include "quantkit/status.h"

namespace quantkit {

struct QatOptions {
  std::string model;
  std::string data;          // training data (a data spec)
  std::string output_dir;    // required
  ImagePreprocessing image;  // of image-folder data
  std::string labels;        // labels .npy (int [N]) for training data that carries none
  int64_t samples = 0;       // the first N training samples (0: all)
  // The plan training starts from (any plan file); empty: calibrate first with `method` on
  // `calib_data` (default: `data`), `calib_samples` samples.
  std::string plan;
  std::string method = "max";
  std::string calib_data;
  int64_t calib_samples = 1024;
  Placement placement;
  int64_t steps = 0;   // optimizer steps (overrides epochs)
  int64_t epochs = 0;  // epochs over `data` (1 when both are 0)
  // The global batch: under a launch each rank runs batch_size / N of its samples and the
  // gradients are averaged over the ranks before each step (a multiple of the ranks).
  int64_t batch_size = 64;
  uint64_t seed = 0;                // shuffling
  double lr = 1e-4;                 // peak learning rate (linear warm-up, then cosine to 0)
  int64_t warmup_steps = 0;         // 0: 5% of the steps
  std::string optimizer = "adamw";  // adamw | sgd (momentum 0.9)
  double weight_decay = 0.0;
  // mse | kl (label-free distillation from the FP32 model) | ce (labels) | ce+kl | ce+mse
  std::string loss = "mse";
  double temperature = 1.0;                  // KL only
  std::vector<std::string> feature_tensors;  // intermediate-feature MSE on these tensors
  double feature_weight = 0.0;               // 0 with feature tensors: 1
  bool recompute_weight_scales = true;       // false: keep the plan's weight scales
  bool learn_activation_scales = true;       // LSQ; false: keep the plan's activation scales
  std::string val;  // validation data: top-1 with labels, else agreement with FP32
  int64_t val_samples = 0;
  int64_t eval_every = 0;  // steps between validations (0: once per epoch)
  std::string resume;      // a checkpoint (OUT/checkpoint.pt of an earlier run)
  int64_t stop_after = 0;  // > 0: stop after N steps of this run, write only the checkpoint
  bool progress = false;   // a bar on stderr when it is a terminal
  DistributedOptions distributed;
};

struct QatEvaluation {
  int64_t step = 0;
  double metric = 0;
};

struct QatReport {
  std::string metric;              // "top1" | "agreement" ("" without `val`)
  std::optional<double> val_ptq;   // before training (the plan's PTQ result in simulation)
  std::optional<double> val_best;  // the kept parameters
  int64_t best_step = 0;
  std::vector<QatEvaluation> evaluations;
  int64_t steps = 0, steps_per_epoch = 0;
  double first_loss = 0, final_loss = 0;
  double seconds = 0, seconds_per_step = 0, cpu_seconds_per_step = 0;
  int64_t peak_rss_bytes = 0;
  bool paused = false;  // stopped by stop_after before the last step
  std::vector<std::string> written;
  std::string summary;  // summary.txt
  std::string text;     // what `quantkit qat` prints
  RankSummary rank;
};

Result<QatReport> Qat(const QatOptions& options);

}  // namespace quantkit
