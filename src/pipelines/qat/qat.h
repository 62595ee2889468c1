// `quantkit qat`: quantization-aware fine-tuning of an ONNX model itself (docs/qat.md).
//
//   plan (--plan, or calibrate first)  ->  BatchNormalization folded into its Conv (frozen stats)
//   -> the Q/DQ model calibrate exports (passes::ApplyPlan: TensorRT placement)
//   -> training graph (passes::QdqToFakeQuant) -> train::QatTrainer steps on shuffled batches
//      (FP32 teacher on the same batch: label-free distillation by default; cross-entropy with
//      labels)
//   -> validation before training and per epoch (--val, else a held-out tail of --data), on the
//      output-aware metric of analyze/fallback with rel_mse vs FP32 breaking ties; the best step,
//      the PTQ start included, is kept (and the summary says so when that is the start),
//      checkpoints (--resume)
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
  std::string teacher;  // distilled from and validated against; empty: model
  const std::string& teacher_path() const { return teacher.empty() ? model : teacher; }
  std::string data;  // training data (data::OpenSource spec)
  data::ImageOptions image;
  std::string labels;           // optional labels .npy (int, [N]) for data that carries none
  int64_t samples = 0;          // first N training samples (0: all)
  std::string plan;             // plan in any hub format; empty: calibrate first
  quant::MethodRequest method;  // calibrate-first method
  std::string calib_data;       // calibrate-first data (default: the training data)
  int64_t calib_samples = 1024;
  passes::PlacementOptions placement;
  // The exported model's float part (--float-dtype, --cast-io, --keep-fp32): these when given,
  // else the plan's own (a plan.json's, a Q/DQ model's; the default for a cache, or when
  // calibrating first). Training itself runs in FP32 with fake quantization.
  std::optional<passes::FloatOptions> floats;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;  // of model.qdq.onnx
  int64_t epochs = 0;  // used when steps == 0 (both 0: one epoch)
  int64_t steps = 0;
  int64_t batch_size = 64;
  uint64_t seed = 0;
  train::TrainerOptions trainer;  // total_steps is filled here
  // The peak learning rate. kGiven: trainer.lr. kAuto (--lr auto): chosen on the validation data
  // among kLrCandidates by short trial runs (QatResult::lr_search, docs/qat.md); an error without
  // validation data. kDefault (no --lr): chosen as kAuto when the run is validated, else trainer.lr
  // (1e-4); a resumed run continues at its checkpoint's lr. Why chosen by default: AdamW's first
  // steps move every weight by about lr, and the right lr spans two decades (zoo 3e-4 .. 1e-3, the
  // shipped PP-OCRv4 recognizer 1e-5, where 1e-4 takes exact match from 0.39 to 0.03).
  enum class LrRule { kGiven, kAuto, kDefault };
  LrRule lr_rule = LrRule::kDefault;
  static constexpr double kLrCandidates[] = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3};
  // Tried in this order, after kLrCandidates, only when none of those beat the PTQ start; the
  // first that does is chosen, else the last.
  static constexpr double kLrCandidatesBelow[] = {3e-6, 1e-6};
  double warmup_fraction =
      0.05;  // share of the steps spent warming up (when trainer.warmup_steps == 0)
  bool recompute_weight_scales = true;
  // LSQ by default: a frozen scale cannot undo a calibration that clips (an entropy plan clips
  // 28% of plain_cnn's input and costs 7.7 points; learned, QAT ends within 0.3 of FP32).
  bool learn_activation_scales = true;
  // Validation (docs/qat.md, "Validation"): scored on --val, else on a held-out tail of --data.
  std::string val;  // validation data
  int64_t val_samples = 0;
  // Without --val: the last N samples of the training data (after --samples) validate the run
  // and are not trained on. kAutoHoldout: 10% of them, at most kMaxAutoHoldout, as long as a
  // batch is left to train on; 0: none (the summary then warns that nothing validated the run).
  static constexpr int64_t kAutoHoldout = -1;
  int64_t holdout = kAutoHoldout;
  // The primary validation metric (analysis::MakeMetric's names); empty: the output-aware rule
  // of analyze and fallback (analysis::DefaultMetricName): top-1 with labels / argmax agreement
  // on a [batch, classes] output, rel_mse vs FP32 on any other. Ties on top1/agreement are broken
  // by rel_mse vs the FP32 teacher.
  std::string metric;
  int64_t eval_every = 0;  // steps between validations (0: once per epoch)
  std::string output_dir;
  std::string resume;      // checkpoint to continue from
  int64_t stop_after = 0;  // > 0: stop after this many steps of this run, write only the
                           // checkpoint (time-sliced jobs; continue with `resume`)
  bool progress = true;
  // Student, teacher and optimizer state live on runtime::DefaultDevice() (--device).
  // Under torchrun/srun/a PyTorchJob: data-parallel. batch_size is the global batch; each rank
  // runs batch_size / N of its samples and the gradients are averaged over the ranks (in rank
  // order: the same bits on every rank) before each optimizer step. Rank 0 writes.
  distributed::DistributedOptions distributed;
};

// One validation: the primary metric, then the continuous tie-breaker (rel_mse vs the FP32
// teacher, lower is better; absent when the primary metric is rel_mse itself). Scores compare
// lexicographically, so equal top-1/agreement values are decided by the output error.
struct QatScore {
  double metric = 0;
  std::optional<double> tiebreak;
};

struct QatEval {
  int64_t step = 0;
  QatScore score;
};

// One trial of --lr auto: the validation score of a short run at this peak learning rate.
struct LrTrial {
  double lr = 0;
  QatScore score;
  double seconds = 0;
};
struct LrSearch {
  std::vector<LrTrial> trials;  // in kLrCandidates order
  int64_t steps = 0;            // of each trial
  QatScore ptq;                 // the PTQ start's score, the trials' reference
  double chosen = 0;
  bool beat_ptq = false;  // the chosen trial scored better than the PTQ start
  double seconds = 0;
};

struct QatResult {
  std::optional<LrSearch> lr_search;  // when the lr was chosen
  double lr = 0;                      // the peak lr used
  std::string lr_source;  // why that lr, when not chosen: "--lr", "the default: ...", ...
  // Where the distillation loss is taken when not on the first output (the logits of a Softmax
  // output, with --loss kl); empty: the first output.
  std::string distill_on;
  // The same for the cross-entropy (--loss ce, ce+kl): the logits of a [batch, classes] Softmax
  // output; empty: the first output.
  std::string label_on;
  std::string metric;                // "top1" | "agreement" | "rel_mse" ("" when not validated)
  bool higher_is_better = true;      // of `metric`
  std::string tiebreak;              // "rel_mse" beside top1/agreement, else ""
  std::string val_data;              // what validated: "--val ...", or the held-out samples
  int64_t holdout = 0;               // samples of --data held out (not trained on)
  std::optional<QatScore> val_ptq;   // before training (the plan's PTQ result in simulation)
  std::optional<QatScore> val_best;  // the kept parameters (FP32 fake quantization, as trained)
  // The same validation of the written model.qdq.onnx as TensorRT computes it (its float part in
  // its float dtype, INT8 weights): what the deployed engine scores.
  std::optional<QatScore> val_exported;
  // Loud notes, also in the summary: no step beat the PTQ start (the PTQ model was written), or
  // nothing validated the run. The CLI prints them on stderr.
  std::vector<std::string> warnings;
  // ApplyPlan's line for model.qdq.onnx (Q/DQ pairs, float dtype, Casts).
  std::string export_summary;
  int64_t best_step = 0;
  std::vector<QatEval> evals;
  int64_t steps = 0;
  int64_t steps_per_epoch = 0;
  double first_loss = 0, final_loss = 0;
  double seconds = 0, seconds_per_step = 0;
  double cpu_seconds_per_step =
      0;  // process CPU time (user+sys, all threads): robust on a shared machine
  int64_t peak_rss_bytes = 0;
  int folded_batch_norms = 0, weight_pairs = 0, activation_pairs = 0, parameters = 0;
  bool paused = false;  // stopped by stop_after before the last step
  std::vector<std::string> written;
  std::string summary;
  distributed::RankReport rank;  // this process's part (samples per step, time of the steps)
};

Result<QatResult> RunQat(const QatOptions& options);

}  // namespace quantkit::pipelines
