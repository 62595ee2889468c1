// `quantkit qat`: quantization-aware fine-tuning of an ONNX model itself (docs/qat.md).
//
//   plan (--plan, or calibrate first)  ->  BatchNormalization folded into its Conv (frozen stats)
//   -> the Q/DQ model calibrate exports (passes::ApplyPlan: TensorRT placement)
//   -> training graph (passes::QdqToFakeQuant) -> train::QatTrainer steps on shuffled batches
//      (FP32 teacher on the same batch: label-free distillation by default; cross-entropy with
//      labels)
//   -> per-epoch validation with keep-the-best, checkpoints (--resume)
//   -> OUT/model.qdq.onnx (fine-tuned weights, weight scales recomputed from them, final activation
//      scales; written as every writer writes: INT8 weight storage, the float part in FP16 by
//      default, passes::ApplyPlan), then, with --val, that model checked as TensorRT computes it
//      (QatResult::val_exported beside the trained model's val_best), OUT/model.float.onnx,
//      OUT/calib.cache, OUT/plan.json (provenance: method, data, steps, loss),
//      OUT/training_log.json, OUT/summary.txt, OUT/checkpoint.npz
//
// Inputs are never modified; every output is written to a temp file and renamed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/image_options.h"
#include "distributed/launch.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_placement.h"
#include "quant/tensor_calib.h"
#include "quantkit/status.h"
#include "train/qat_trainer.h"

namespace quantkit::pipelines {

struct QatOptions {
  std::string model;
  std::string data;               // training data (data::OpenSource spec)
  data::ImageOptions image;
  std::string labels;             // optional labels .npy (int, [N]) for data that carries none
  int64_t samples = 0;            // first N training samples (0: all)
  std::string plan;               // plan in any hub format; empty: calibrate first
  quant::MethodRequest method;    // calibrate-first method
  std::string calib_data;         // calibrate-first data (default: the training data)
  int64_t calib_samples = 1024;
  passes::PlacementOptions placement;
  // The exported model's float part (--float-dtype, --cast-io, --keep-fp32): these when given,
  // else the plan's own (a plan.json's, a Q/DQ model's; the default for a cache, or when
  // calibrating first). Training itself runs in FP32 with fake quantization.
  std::optional<passes::FloatOptions> floats;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;  // of model.qdq.onnx
  int64_t epochs = 0;             // used when steps == 0 (both 0: one epoch)
  int64_t steps = 0;
  int64_t batch_size = 64;
  uint64_t seed = 0;
  train::TrainerOptions trainer;  // total_steps is filled here
  double warmup_fraction = 0.05;    // share of the steps spent warming up (when trainer.warmup_steps == 0)
  bool recompute_weight_scales = true;
  // LSQ by default: a frozen scale cannot undo a calibration that clips (an entropy plan clips
  // 28% of plain_cnn's input and costs 7.7 points; learned, QAT ends within 0.3 of FP32).
  bool learn_activation_scales = true;
  std::string val;                // validation data: top-1 with labels, else agreement with FP32
  int64_t val_samples = 0;
  int64_t eval_every = 0;         // steps between validations (0: once per epoch)
  std::string output_dir;
  std::string resume;             // checkpoint to continue from
  int64_t stop_after = 0;         // > 0: stop after this many steps of this run, write only the
                                  // checkpoint (time-sliced jobs; continue with `resume`)
  bool progress = true;
  // Student, teacher and optimizer state live on runtime::DefaultDevice() (--device).
  // Under torchrun/srun/a PyTorchJob: data-parallel. batch_size is the global batch; each rank
  // runs batch_size / N of its samples and the gradients are averaged over the ranks (in rank
  // order: the same bits on every rank) before each optimizer step. Rank 0 writes.
  distributed::DistributedOptions distributed;
};

struct QatEval {
  int64_t step = 0;
  double metric = 0;
};

struct QatResult {
  std::string metric;                 // "top1" | "agreement" ("" without --val)
  std::optional<double> val_ptq;      // before training (the plan's PTQ result in simulation)
  std::optional<double> val_best;     // the kept parameters (FP32 fake quantization, as trained)
  // The same validation of the written model.qdq.onnx as TensorRT computes it (its float part in
  // its float dtype, INT8 weights): what the deployed engine scores.
  std::optional<double> val_exported;
  // ApplyPlan's line for model.qdq.onnx (Q/DQ pairs, float dtype, Casts).
  std::string export_summary;
  int64_t best_step = 0;
  std::vector<QatEval> evals;
  int64_t steps = 0;
  int64_t steps_per_epoch = 0;
  double first_loss = 0, final_loss = 0;
  double seconds = 0, seconds_per_step = 0;
  double cpu_seconds_per_step = 0;  // process CPU time (user+sys, all threads): robust on a shared machine
  int64_t peak_rss_bytes = 0;
  int folded_batch_norms = 0, weight_pairs = 0, activation_pairs = 0, parameters = 0;
  bool paused = false;                // stopped by stop_after before the last step
  std::vector<std::string> written;
  std::string summary;
  distributed::RankReport rank;  // this process's part (samples per step, time of the steps)
};

Result<QatResult> RunQat(const QatOptions& options);

}  // namespace quantkit::pipelines
