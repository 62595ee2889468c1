// The steps of `quantkit qat` (pipelines/qat/qat.h), in the order RunQat runs them. Each step
// takes what the ones before it made and returns what the ones after it need; none prints.
//
//   1. ValidateOptions   options alone and against the launch (ranks, global batch)  qat.cc
//   2. MakeStartPlan     --plan, or calibrate now; the plan training starts from     prepare.cc
//   3. PrepareGraphs     BN folded, Q/DQ inserted (TensorRT placement), FakeQuantize  prepare.cc
//                        pairs, trainable parameters; the FP32 teacher
//   4. OpenTrainingData  training data, --labels, validation data (--val or a held-  data.cc
//                        out tail of --data); batches
//   5. sharding          each rank's slice of every global batch, gradients averaged  ranks.cc
//                        in rank order
//      OpenValidation    the metric (output-aware rule), FP32 outputs once; scores   validation.cc
//                        summed per batch in batch order over the ranks
//   6. checkpoints       --resume, and a checkpoint after each validation / pause     loop.cc
//   7. Train             the loop: shuffled batches, steps, validation, keep-the-best loop.cc
//   8. WriteResults      fine-tuned float and Q/DQ models, calib.cache, plan.json,   report.cc
//                        the written model validated as TensorRT computes it,
//                        training_log.json, training.svg (plot.cc), summary.txt
// Internal to pipelines/qat/.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/simulate.h"
#include "common/artifact_set.h"
#include "data/shard.h"
#include "data/source.h"
#include "distributed/communicator.h"
#include "ir/graph.h"
#include "pipelines/qat/qat.h"
#include "quant/plan.h"
#include "quantkit/status.h"
#include "runtime/interpreter.h"
#include "train/qat_trainer.h"

namespace quantkit::pipelines::qat {

// 1. Validation. Opens this process's communicator and checks the options against it (the
// global batch splits evenly over the ranks); fills result->rank's rank and world size.
struct Launch {
  std::unique_ptr<distributed::Communicator> comm;
  int world = 1;
  int64_t local_batch = 0;  // this rank's samples of each global batch
};
Result<Launch> ValidateOptions(const QatOptions& o, QatResult* result);

// 2. The start plan: --plan, or calibrated now on the calibration data.
struct StartPlan {
  quant::QuantPlan plan;  // as read or calibrated (its method names where training started)
  // What the training graph and the exported model are built from: the start plan without its
  // weight scales (ApplyPlan recomputes them from the weights it is given) unless they are frozen,
  // and with an FP32 float part (training computes in FP32; the export takes plan.float_precision).
  quant::QuantPlan train;
  analysis::SimulationOptions sim;  // the placement, for training and export alike
};
Result<StartPlan> MakeStartPlan(const QatOptions& o);

// The float model as the student starts from it: BatchNormalization folded into its Conv.
Result<ir::Model> LoadFolded(const std::string& path, int* folded);

// 3. Graph preparation: the student's training graph, the teacher and the trainable parameters.
// With frozen weight scales, plan->train gains the scales ApplyPlan filled for BN-folded weights.
struct Graphs {
  ir::Model student;  // Q/DQ pairs rewritten into FakeQuantize nodes
  ir::Model teacher;  // the FP32 model
  std::map<std::string, std::string> learned_scales;  // activation tensor -> its scale initializer
  std::vector<std::string> parameters;                // what the optimizer updates
};
Result<Graphs> PrepareGraphs(const QatOptions& o, StartPlan* plan, QatResult* result);
// The logits a Softmax first output is made from, in both graphs, and the class axis: a Softmax
// over one axis, or the opset upgrade's Reshape(Softmax(Flatten(x, k)), Shape(x)) when k is x's
// last axis. nullopt when either graph's first output is not such a softmax, or their axes differ.
std::optional<train::DistillTarget> SoftmaxLogits(const ir::Model& student,
                                                  const ir::Model& teacher);
// --loss kl (or ce+kl) on a model whose first output is a Softmax: the KL is taken on its logits,
// per position (train::DistillTarget), and QatResult::distill_on says so. --loss ce (ce+kl) on a
// [batch, classes] Softmax output: the cross-entropy reads the logits too (QatResult::label_on).
void ChooseLogitsTargets(const Graphs& graphs, train::TrainerOptions* topts, QatResult* result);

// 4. Training data (the first --samples), --labels checked against it and the model's classes,
// and validation data.
struct TrainingData {
  std::unique_ptr<data::Source> train;
  std::vector<int64_t> labels;        // --labels for the training samples (empty: none given)
  std::unique_ptr<data::Source> val;  // --val, or the held-out tail of --data; null: none
  int64_t samples = 0;                // training samples used
  int64_t holdout = 0;                // samples held out of --data (the last ones), not trained on
  int64_t val_first_sample = 0;       // where `val` starts in its data (the held-out tail)
  std::string val_description;        // for the summary
};
// How many samples of `n` (--samples applied) are held out without --val: `requested` when
// given, else 10% (at most kMaxAutoHoldout) when a batch of training data remains, else none.
inline constexpr int64_t kMaxAutoHoldout = 1000;
Result<int64_t> HoldoutSize(int64_t requested, int64_t n, int64_t batch_size, bool has_val);
Result<TrainingData> OpenTrainingData(const QatOptions& o, const ir::Model& teacher);

// Sample order of an epoch: a Fisher-Yates shuffle seeded by (seed, epoch), portable.
std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t epoch);
// Samples `indices` of `source` stacked into one batch.
Result<train::TrainingBatch> GatherSamples(const data::Source& source,
                                           const std::vector<int64_t>& indices);
// A batch of the data as the trainer takes it.
train::TrainingBatch ToTraining(data::Batch&& b);

// 5. Sharding.
// This rank's slice of the global batch that starts at `offset` of the epoch's permutation.
std::vector<int64_t> RankSlice(const std::vector<int64_t>& perm, int64_t offset, int rank,
                               int64_t local_batch);
// Data-parallel step: every rank's gradients and step result averaged, in rank order.
Status AverageOverRanks(distributed::Communicator& comm, std::vector<float>* gradients,
                        train::StepResult* r);

// Validation (validation.cc). The metric is the one rule of analyze and fallback
// (analysis::MakeOutputAwareMetric): --metric, else top-1 with labels / argmax agreement with FP32
// on a [batch, classes] output, else rel_mse vs FP32. Beside top1/agreement, rel_mse vs the FP32
// teacher breaks ties. Each rank scores its shard (whole batches); every batch's metric state is
// gathered and added in batch order, so every rank gets one process's value bit for bit.
struct Validation {
  const data::Source* source = nullptr;  // TrainingData::val
  data::ShardRange shard;                // this rank's samples
  int64_t batch_size = 0;
  bool has_labels = false;
  // The FP32 teacher's first output of each of this rank's batches, computed once (null beyond
  // kTeacherCacheBytes: recomputed at each validation).
  std::vector<std::optional<ir::Tensor>> teacher;
  std::unique_ptr<analysis::Metric> metric;
  std::unique_ptr<analysis::Metric> tiebreak;  // rel_mse; null when `metric` is rel_mse
};
inline constexpr int64_t kTeacherCacheBytes = int64_t{1} << 30;
// Null `data.val`: an empty Validation (metric null) and result->metric "".
Result<Validation> OpenValidation(const QatOptions& o, const TrainingData& data,
                                  const train::QatTrainer& trainer, distributed::Communicator& comm,
                                  QatResult* result);
Result<QatScore> Validate(const train::QatTrainer& trainer, const Validation& v,
                          distributed::Communicator& comm);
// a better than b: the primary metric, then (on equal values) the tie-breaker, lower first; a
// missing tie-breaker loses to a present one.
bool Better(const QatScore& a, const QatScore& b, bool higher_is_better);

// The summary's loud notes (QatResult::warnings): the run was not validated, or no step beat the
// PTQ start (so the PTQ model is what was written).
void AddWarnings(const QatOptions& o, const TrainingData& data, QatResult* result);

// 6. Checkpoints. The parameters kept so far (keep-the-best) travel in each checkpoint.
struct Best {
  std::vector<runtime::NamedTensor> parameters;  // empty until a validation ran
  std::optional<QatScore> score;
};
// --resume: the trainer's state and the bookkeeping of the run that wrote the checkpoint. A
// checkpoint whose hold-out or validation metric differs from this run's is refused (its kept
// parameters were chosen on other data or by another measure), naming the option to continue it.
Status Resume(const QatOptions& o, int64_t total_steps, const TrainingData& data,
              const Validation& validation, train::QatTrainer& trainer, Best* best,
              QatResult* result);
// Written by rank 0; every rank learns its outcome.
Status SaveCheckpoint(distributed::Communicator& comm, const train::QatTrainer& trainer,
                      const std::string& path, const Best& best, const QatResult& result);

// 7. The training loop, from the trainer's step to total_steps (or --stop-after).
struct StepLog {
  int64_t step = 0;  // 1-based
  int64_t epoch = 0;
  train::StepResult result;
};
struct TrainingRun {
  int64_t total_steps = 0;
  int64_t first_step = 0;  // where this run started (> 0 after --resume)
  std::vector<StepLog> log;
  Best best;
  // Time of the training steps alone (batch assembly included, validation and checkpoints not).
  double train_seconds = 0, cpu_seconds = 0;
};
Status Train(const QatOptions& o, Launch& launch, const TrainingData& data,
             const Validation& validation, train::QatTrainer& trainer,
             const std::string& checkpoint, TrainingRun* run, QatResult* result);

// The epoch's sample order, drawn once per epoch.
struct EpochOrder {
  int64_t epoch = -1;
  std::vector<int64_t> perm;
};
// Step `s` (0-based) of a run: this rank's slice of the global batch the permutation of its epoch
// gives, its labels, one trainer step with the gradients averaged over the ranks.
Result<train::StepResult> TrainStep(const QatOptions& o, Launch& launch, const TrainingData& data,
                                    train::QatTrainer& trainer, int64_t s, int64_t steps_per_epoch,
                                    EpochOrder* order);

// The peak lr by QatOptions::lr_rule (lr_search.cc): sets result->lr and result->lr_source (a
// given lr, the default, a resumed checkpoint's) and returns true when it is to be chosen by
// ChooseLearningRate instead (--lr auto, or no --lr on a validated run that resumes nothing).
// kCheckpointLr is the checkpoint value that records a run's peak lr.
inline constexpr const char* kCheckpointLr = "lr";
Result<bool> ResolveLearningRate(const QatOptions& o, const TrainingData& data, QatResult* result);

// --lr auto (lr_search.cc): short trial runs from the PTQ start, one per candidate peak learning
// rate, each the run's schedule in miniature (warm-up share, cosine to 0) over the run's first
// batches, scored on the validation data like keep-the-best; the best candidate's lr is returned
// and every trial is recorded in result->lr_search. The trainers are built from copies of
// `student` and `teacher`. Needs validation data (kInvalidArgument otherwise).
Result<double> ChooseLearningRate(const QatOptions& o, Launch& launch, const TrainingData& data,
                                  const Validation& validation, const ir::Model& student,
                                  const ir::Model& teacher,
                                  const std::vector<std::string>& parameters,
                                  const train::TrainerOptions& run_options, QatResult* result);

// 8. The results (rank 0): the fine-tuned float model, the plan and Q/DQ model built from it,
// the training log, the curve and the summary, staged into `out` (opened on the output directory
// with kResultFiles before the training) and committed as one set; result->written lists them
// and the checkpoint, which is written on its own (a paused run leaves only it).
inline const std::vector<std::string> kResultFiles{
    "model.qdq.onnx", "model.float.onnx",  "calib.cache",  "ranges.txt",
    "plan.json",      "training_log.json", "training.svg", "summary.txt"};
Status WriteResults(const QatOptions& o, const StartPlan& plan, const Graphs& graphs,
                    const train::TrainerOptions& trainer_options, const TrainingData& data,
                    const train::QatTrainer& trainer, const TrainingRun& run,
                    std::chrono::steady_clock::time_point start, ArtifactSet* out,
                    QatResult* result);

// "cross-entropy+distillation", "cross-entropy", "distillation-mse" or "distillation-kl".
const char* LossName(const train::TrainerOptions& t);

}  // namespace quantkit::pipelines::qat
