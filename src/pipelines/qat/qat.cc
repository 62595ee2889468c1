// RunQat: the steps of pipelines/qat/steps.h in order, and the validation of the options.
#include "pipelines/qat/qat.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "analysis/metrics.h"
#include "common/check.h"
#include "distributed/launch.h"
#include "ir/clone.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines {

namespace qat {

Result<Launch> ValidateOptions(const QatOptions& o, QatResult* result) {
  QK_RETURN_IF_NOT(o.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be > 0, got {}", o.batch_size);
  QK_RETURN_IF_NOT(!o.output_dir.empty(), StatusCode::kInvalidArgument,
                   "an output directory (-o) is required");
  QK_RETURN_IF_NOT(o.steps >= 0 && o.epochs >= 0, StatusCode::kInvalidArgument,
                   "--steps/--epochs must be >= 0");
  // Every number before any work (the calibration pass of a run without --plan included).
  QK_RETURN_IF_NOT(o.samples >= 0 && o.val_samples >= 0 && o.eval_every >= 0 && o.stop_after >= 0,
                   StatusCode::kInvalidArgument,
                   "--samples, --val-samples, --eval-every and --stop-after must be >= 0");
  QK_RETURN_IF_NOT(o.plan.empty() ? o.calib_samples > 0 : o.calib_samples >= 0,
                   StatusCode::kInvalidArgument, "--calib-samples must be > 0, got {}",
                   o.calib_samples);
  QK_RETURN_IF_NOT(
      std::isfinite(o.warmup_fraction) && o.warmup_fraction >= 0 && o.warmup_fraction <= 1,
      StatusCode::kInvalidArgument, "the warm-up share must be in [0, 1], got {}",
      o.warmup_fraction);
  QK_RETURN_IF_ERROR(train::CheckTrainerOptions(o.trainer));
  QK_RETURN_IF_NOT(o.holdout >= QatOptions::kAutoHoldout, StatusCode::kInvalidArgument,
                   "--holdout must be >= 0, got {}", o.holdout);
  // An unknown --metric fails now, before the calibration; whether the data suits it (labels for
  // top1) is checked when the validation data is opened.
  if (!o.metric.empty()) {
    const Status known = analysis::MakeMetric(o.metric).status();
    QK_RETURN_IF_NOT(known.ok(), StatusCode::kInvalidArgument, "--metric: {}", known.message());
  }
  QK_RETURN_IF_NOT(
      o.lr_rule != QatOptions::LrRule::kAuto || o.holdout != 0 || !o.val.empty(),
      StatusCode::kInvalidArgument,
      "--lr auto chooses on validation data, and --holdout 0 leaves none: give --val, or leave "
      "--holdout at its default");
  // --resume: a file that is not a checkpoint fails now, naming it, not after the calibration.
  if (!o.resume.empty()) QK_RETURN_IF_ERROR(train::CheckCheckpointFile(o.resume));
  Launch launch;
  QK_ASSIGN_OR_RETURN(launch.comm, distributed::OpenCommunicator(o.distributed));
  launch.world = launch.comm->world_size();
  QK_RETURN_IF_NOT(
      launch.world == 1 || !o.plan.empty(), StatusCode::kInvalidArgument,
      "qat under a distributed launch needs --plan (calibrate first, under the same launch: "
      "docs/distributed.md)");
  QK_RETURN_IF_NOT(o.batch_size % launch.world == 0, StatusCode::kInvalidArgument,
                   "--batch-size {} is the global batch: it must be a multiple of the {} ranks",
                   o.batch_size, launch.world);
  launch.local_batch = o.batch_size / launch.world;
  result->rank.rank = launch.comm->rank();
  result->rank.world_size = launch.world;
  return launch;
}

void WarnOfAStageChangedTeacher(const QatOptions& o, const quant::Provenance& start,
                                QatResult* result) {
  if (!o.teacher.empty() || start.float_model_sha256.empty()) return;
  // Every weight-changing stage but smoothquant (which keeps the float function) makes
  // model.float.onnx compute something else than the FP32 model: bias correction shifts outputs
  // toward the quantized model's, AdaRound and SeqMSE leave weights on their grids.
  std::vector<std::string> changed;
  for (const std::string& s : start.stages) {
    if (s.rfind("smoothquant", 0) != 0) changed.push_back(s.substr(0, s.find_first_of("( ")));
  }
  if (changed.empty()) return;
  result->warnings.push_back(fmt::format(
      "the teacher is {}, whose weights the PTQ stages {} changed: it is not the FP32 model's function, yet "
      "training distils toward it and validation compares with it; give --teacher with the model calibrate read",
      o.model, fmt::join(changed, ", ")));
}

void AddWarnings(const QatOptions& o, const TrainingData& data, QatResult* result) {
  if (result->metric.empty()) {
    result->warnings.push_back(fmt::format(
        "not validated ({}): nothing checked that the trained model beats its PTQ start; the last step's "
        "parameters were written",
        o.holdout == 0
            ? "no --val, --holdout 0"
            : fmt::format(
                  "no --val, and {} training samples are too few to hold out 10% and keep a "
                  "batch of {}",
                  data.samples, o.batch_size)));
    return;
  }
  if (result->val_best && result->best_step == 0 && result->steps > 0) {
    result->warnings.push_back(fmt::format(
        "no step beat the PTQ start on {}{}: wrote the PTQ model (training did not improve it on {})",
        result->metric, result->tiebreak.empty() ? "" : " (then " + result->tiebreak + " vs FP32)",
        result->val_data));
  }
}

void ChooseLogitsTargets(const Graphs& graphs, train::TrainerOptions* topts, QatResult* result) {
  const std::optional<train::DistillTarget> logits = SoftmaxLogits(graphs.student, graphs.teacher);
  if (!logits) return;
  // Cross-entropy takes one class axis per sample: a [batch, classes] Softmax (a rank-2 output,
  // whose softmax SoftmaxLogits accepts only over axis 1).
  if (topts->label_weight > 0 && graphs.student.graph->outputs().front()->type.dims.size() == 2) {
    topts->label_logits = logits->student;
    result->label_on = fmt::format("on the logits '{}' of the Softmax output '{}'", logits->student,
                                   graphs.student.graph->outputs().front()->name());
  }
  if (topts->distill != train::DistillLoss::kKl || topts->distill_weight <= 0) return;
  topts->distill_on = *logits;
  result->distill_on =
      fmt::format("KL on the logits '{}' of the Softmax output '{}', per position over axis {}",
                  logits->teacher, graphs.teacher.graph->outputs().front()->name(), logits->axis);
}

}  // namespace qat

Result<QatResult> RunQat(const QatOptions& o) {
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  QatResult result;
  QK_ASSIGN_OR_RETURN(qat::Launch launch, qat::ValidateOptions(o, &result));
  distributed::Communicator& comm = *launch.comm;
  // Rank 0 locks -o before the long work and stages the results there, committed together at the
  // end (common/artifact_set.h): a failed, stopped or interrupted run leaves at most its
  // checkpoint, never a mixed set; a concurrent run into the same directory fails at once.
  std::unique_ptr<ArtifactSet> out;
  Status opened = Status::Ok();
  if (comm.is_root()) {
    Result<std::unique_ptr<ArtifactSet>> set = ArtifactSet::Open(o.output_dir, qat::kResultFiles);
    if (set.ok()) {
      out = std::move(*set);
    } else {
      opened = set.status();
    }
  }
  QK_RETURN_IF_ERROR(comm.Agree(opened, "opening the output directory on rank 0"));
  QK_ASSIGN_OR_RETURN(qat::StartPlan plan, qat::MakeStartPlan(o));
  QK_ASSIGN_OR_RETURN(qat::Graphs graphs, qat::PrepareGraphs(o, &plan, &result));
  qat::WarnOfAStageChangedTeacher(o, plan.plan.provenance, &result);
  QK_ASSIGN_OR_RETURN(qat::TrainingData data, qat::OpenTrainingData(o, graphs.teacher));

  result.steps_per_epoch = data.samples / o.batch_size;  // whole batches only
  qat::TrainingRun run;
  run.total_steps = o.steps > 0 ? o.steps : std::max<int64_t>(o.epochs, 1) * result.steps_per_epoch;
  train::TrainerOptions topts = o.trainer;
  topts.total_steps = run.total_steps;
  if (topts.warmup_steps == 0) {
    topts.warmup_steps = static_cast<int64_t>(std::floor(o.warmup_fraction * run.total_steps));
  }
  qat::ChooseLogitsTargets(graphs, &topts, &result);
  QK_ASSIGN_OR_RETURN(const bool choose_lr, qat::ResolveLearningRate(o, data, &result));
  topts.lr = result.lr;
  // Choosing the lr: the trial trainers, and then the run's, start from copies of the graphs.
  std::optional<ir::Model> student_copy, teacher_copy;
  if (choose_lr) {
    QK_ASSIGN_OR_RETURN(student_copy, ir::CloneModel(graphs.student));
    QK_ASSIGN_OR_RETURN(teacher_copy, ir::CloneModel(graphs.teacher));
  }
  QK_ASSIGN_OR_RETURN(
      std::unique_ptr<train::QatTrainer> trainer,
      train::QatTrainer::Create(std::move(graphs.student), std::move(graphs.teacher),
                                graphs.parameters, topts));

  const std::string checkpoint = (fs::path(o.output_dir) / "checkpoint.npz").string();

  QK_ASSIGN_OR_RETURN(qat::Validation validation,
                      qat::OpenValidation(o, data, *trainer, comm, &result));
  if (choose_lr) {
    QK_ASSIGN_OR_RETURN(
        topts.lr, qat::ChooseLearningRate(o, launch, data, validation, *student_copy, *teacher_copy,
                                          graphs.parameters, topts, &result));
    QK_ASSIGN_OR_RETURN(
        trainer, train::QatTrainer::Create(std::move(*student_copy), std::move(*teacher_copy),
                                           graphs.parameters, topts));
  }
  QK_RETURN_IF_ERROR(
      qat::Resume(o, run.total_steps, data, validation, *trainer, &run.best, &result));
  QK_RETURN_IF_ERROR(qat::Train(o, launch, data, validation, *trainer, checkpoint, &run, &result));
  result.steps = trainer->steps_done();
  // Its slice of every global batch (positions in the batch, not sample numbers), one pass a step.
  result.rank.shard = {comm.rank() * launch.local_batch, (comm.rank() + 1) * launch.local_batch};
  result.rank.passes = result.steps - run.first_step;
  result.rank.work_seconds = run.train_seconds;
  if (result.paused) {
    result.summary =
        fmt::format("qat: stopped at step {} of {} (--stop-after); continue with --resume {}\n",
                    result.steps, run.total_steps, checkpoint);
    result.written.push_back(checkpoint);
    return result;
  }
  const int64_t ran = result.steps - run.first_step;
  result.seconds_per_step = ran > 0 ? run.train_seconds / static_cast<double>(ran) : 0.0;
  result.cpu_seconds_per_step = ran > 0 ? run.cpu_seconds / static_cast<double>(ran) : 0.0;
  if (validation.metric && !run.best.parameters.empty()) {
    QK_RETURN_IF_ERROR(trainer->SetParameters(run.best.parameters));  // keep the best
    result.val_best = run.best.score;
  }
  qat::AddWarnings(o, data, &result);
  // Every rank holds the same parameters; rank 0 writes and the others wait for its outcome.
  const Status written = comm.is_root() ? qat::WriteResults(o, plan, graphs, topts, data, *trainer,
                                                            run, start, out.get(), &result)
                                        : Status::Ok();
  QK_RETURN_IF_ERROR(comm.Agree(written, "writing the results on rank 0"));
  return result;
}

}  // namespace quantkit::pipelines
