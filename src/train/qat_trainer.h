// Quantization-aware training of an ONNX graph on the ATen interpreter (ATen-free header).
//
// The student is a training graph: the Q/DQ model `calibrate` exports, with each
// DequantizeLinear(QuantizeLinear(x)) pair rewritten into a FakeQuantize node
// (passes/fake_quant.h, runtime/training_ops.h). Its trainable parameters are initializers named
// by the caller (weights, biases, normalization scale/shift, learned activation scales); they
// become leaf tensors with gradients, everything else stays constant. The teacher is the FP32
// model, run on the same batch without gradients.
//
// One Step(): teacher forward (no grad) -> student forward (autograd on) -> loss -> backward
// (the autograd graph and its saved activations are freed by it) -> optimizer step with the
// learning rate of the schedule (linear warm-up, then cosine annealing to 0 at total_steps).
//
//   loss = distill_weight * D(student, teacher) + label_weight * CE(student, labels)
//          + feature_weight * mean over feature_tensors of MSE(student_f, teacher_f)
//   D = MSE of the first outputs, or KL(softmax(teacher/T) || softmax(student/T)) * T^2.
// With a distillation target (DistillTarget), D compares those tensors instead: the logits a
// Softmax output is made from, the KL taken over the Softmax's axis (mean over the other
// positions).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quantkit/status.h"
#include "runtime/interpreter.h"

namespace quantkit::train {

enum class OptimizerKind { kSgd, kAdamW };
enum class DistillLoss { kMse, kKl };

// Where D is taken when not on the first outputs: a tensor of each graph (the student's may be the
// fake-quantized copy the student's Softmax reads) and, for KL, the class axis.
struct DistillTarget {
  std::string student;  // empty: the first outputs
  std::string teacher;
  int64_t axis = -1;  // KL's softmax axis (>= 0); -1: over everything but the batch axis
};

struct TrainerOptions {
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 1e-4;
  double momentum = 0.9;  // SGD
  double weight_decay = 0.0;
  int64_t total_steps = 1;  // the cosine reaches 0 here
  int64_t warmup_steps = 0;
  DistillLoss distill = DistillLoss::kMse;
  double distill_weight = 1.0;
  double temperature = 1.0;  // KL only
  DistillTarget distill_on;
  double label_weight = 0.0;  // cross-entropy against the batch's labels (required when > 0)
  // The student tensor the cross-entropy reads: a Softmax output's logits [batch, classes] (the
  // loss takes its own log-softmax; on probabilities it would soften them twice); empty: the
  // first output, taken as logits.
  std::string label_logits;
  std::vector<std::string> feature_tensors;  // names present in both graphs
  double feature_weight = 0.0;
};

// One batch: every model input stacked [B, ...], labels int64 [B] when the data has them.
struct TrainingBatch {
  std::vector<runtime::NamedTensor> inputs;
  std::optional<ir::Tensor> labels;
};

struct StepResult {
  double loss = 0, distill = 0, label = 0, feature = 0;
  double lr = 0;
};

// What a checkpoint carries beyond the trainer's own state (the pipeline's bookkeeping).
struct CheckpointExtras {
  std::map<std::string, double> values;    // e.g. best metric, epoch
  std::vector<runtime::NamedTensor> best;  // the best parameters so far (may be empty)
};

// Every number of `o` finite and in its range (learning rate and temperature > 0; weight decay,
// momentum and loss weights >= 0; warm-up >= 0). kInvalidArgument naming the first that is not.
Status CheckTrainerOptions(const TrainerOptions& o);

// What `qat --resume` checks before any work (the trainer needs the graphs, built later): `path`
// is a regular file that libtorch reads as a checkpoint with a step count, an optimizer state and
// parameters. kNotFound / kInvalidArgument naming the file (train/checkpoint_io.cc).
Status CheckCheckpointFile(const std::string& path);

// The pipeline's bookkeeping of the checkpoint at `path` (CheckpointExtras::values), read without a
// trainer: what a run needs to know before it builds one (the peak lr of the run it continues).
Result<std::map<std::string, double>> ReadCheckpointValues(const std::string& path);

class QatTrainer {
 public:
  struct Impl;
  // Fails when a parameter names no float initializer of `student`, a feature tensor is missing
  // from either graph, or the graphs have different inputs.
  static Result<std::unique_ptr<QatTrainer>> Create(ir::Model student, ir::Model teacher,
                                                    const std::vector<std::string>& parameters,
                                                    const TrainerOptions& options);
  ~QatTrainer();

  // Data-parallel training (qat under torchrun): called between backward and the optimizer step
  // with every parameter's gradient, float32, flattened and concatenated in parameter order, and
  // this step's result; it replaces both with their average over the ranks, so every rank
  // applies the same update to the same parameters.
  using GradientReducer = std::function<Status(std::vector<float>* gradients, StepResult* result)>;
  Result<StepResult> Step(const TrainingBatch& batch, const GradientReducer& reduce = nullptr);
  int64_t steps_done() const;
  double LearningRate(int64_t step) const;  // the schedule

  // The first output of the student (with the current parameters) or of the FP32 teacher, run
  // without gradients: a float32 host tensor [B, ...] (validation scores it with
  // analysis::Metric; the teacher's is computed once per validation sample by the caller).
  Result<ir::Tensor> StudentOutput(const TrainingBatch& batch) const;
  Result<ir::Tensor> TeacherOutput(const TrainingBatch& batch) const;

  // Current parameter values (copies), in the order given to Create.
  Result<std::vector<runtime::NamedTensor>> Parameters() const;
  Status SetParameters(const std::vector<runtime::NamedTensor>& values);

  // Parameters, optimizer state, step count and extras; written to a temp file, then renamed
  // (kIoError naming the file when the disk is full or read-only; nothing is left behind).
  Status SaveCheckpoint(const std::string& path, const CheckpointExtras& extras) const;
  // The reverse, checked before anything changes: every parameter present with its shape and
  // finite values, the best parameters likewise, a non-negative step, finite extras, an optimizer
  // state of this optimizer. A file that is not such a checkpoint (missing, a directory, truncated,
  // garbage, another model's) is kNotFound/kInvalidArgument naming it; the trainer is unchanged
  // unless the whole checkpoint loads.
  Result<CheckpointExtras> LoadCheckpoint(const std::string& path);

 private:
  explicit QatTrainer(std::unique_ptr<Impl> impl);
  Result<ir::Tensor> FirstOutput(const TrainingBatch& batch, bool student) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace quantkit::train
