// QAT steps 6 and 7: checkpoints (--resume, a checkpoint after each validation and at a pause)
// and the training loop with validation and keep-the-best.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>

#include "common/check.h"
#include "common/progress.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {

namespace {

// Checkpoint values (train::CheckpointExtras::values) of the validation bookkeeping. A checkpoint
// without "val_metric" was written before validation had a metric rule of its own (the metric
// was then top-1 with labels, else argmax agreement, and nothing was held out).
constexpr const char* kBestMetric = "best_metric";
constexpr const char* kBestTiebreak = "best_tiebreak";
constexpr const char* kBestStep = "best_step";
constexpr const char* kValPtq = "val_ptq";
constexpr const char* kValPtqTiebreak = "val_ptq_tiebreak";
constexpr const char* kValMetric = "val_metric";  // index in analysis::BuiltinMetricNames()
constexpr const char* kHoldout = "holdout";

std::optional<double> Value(const std::map<std::string, double>& values, const char* key) {
  auto it = values.find(key);
  return it == values.end() ? std::nullopt : std::optional<double>(it->second);
}

std::optional<QatScore> ScoreOf(const std::map<std::string, double>& values, const char* metric,
                                const char* tiebreak) {
  std::optional<double> m = Value(values, metric);
  if (!m) return std::nullopt;
  return QatScore{*m, Value(values, tiebreak)};
}

// Checkpoints hold finite numbers only: a non-finite score (rel_mse of a diverged run) is left
// out and reads back as absent.
void PutScore(const std::optional<QatScore>& s, const char* metric, const char* tiebreak,
              std::map<std::string, double>* values) {
  if (!s) return;
  if (std::isfinite(s->metric)) (*values)[metric] = s->metric;
  if (s->tiebreak && std::isfinite(*s->tiebreak)) (*values)[tiebreak] = *s->tiebreak;
}

// A count the checkpoint records (samples held out, a step): a whole number in [0, 2^53], the
// range a float64 holds exactly. Anything else (1e30) is damage, and casting it is undefined.
Result<int64_t> CountValue(const std::map<std::string, double>& values, const char* key,
                           const std::string& path) {
  const double v = Value(values, key).value_or(0);
  QK_RETURN_IF_NOT(v >= 0 && v <= 9007199254740992.0 && v == std::floor(v),
                   StatusCode::kInvalidArgument,
                   "{}: '{}' is {:g}, not a count (a damaged checkpoint)", path, key, v);
  return static_cast<int64_t>(v);
}

// A validation score the checkpoint records: a share in [0, 1] for a metric where higher is better
// (top1, agreement, frame/decode agreement), an error >= 0 otherwise (rel_mse).
Status CheckScore(const std::optional<QatScore>& score, bool share, const char* key,
                  const std::string& path) {
  if (!score) return Status::Ok();
  const double v = score->metric;
  QK_RETURN_IF_NOT(share ? v >= 0 && v <= 1 : v >= 0, StatusCode::kInvalidArgument,
                   "{}: '{}' is {:g}, not a {} (a damaged checkpoint)", path, key, v,
                   share ? "share in [0, 1]" : "metric value >= 0");
  return Status::Ok();
}

}  // namespace

Status Resume(const QatOptions& o, int64_t total_steps, const TrainingData& data,
              const Validation& validation, train::QatTrainer& trainer, Best* best,
              QatResult* result) {
  if (o.resume.empty()) return Status::Ok();
  QK_ASSIGN_OR_RETURN(train::CheckpointExtras extras, trainer.LoadCheckpoint(o.resume));
  const std::map<std::string, double>& v = extras.values;
  // The same training samples: a checkpoint trained with another hold-out saw other data.
  QK_ASSIGN_OR_RETURN(const int64_t holdout, CountValue(v, kHoldout, o.resume));
  QK_RETURN_IF_NOT(
      holdout == data.holdout, StatusCode::kInvalidArgument,
      "{}: the checkpoint's run held out {} samples of --data, this one {} (continue it with "
      "--holdout {})",
      o.resume, holdout, data.holdout, holdout);
  if (!extras.best.empty() && !result->metric.empty()) {
    // The kept parameters were chosen by the checkpoint's metric: comparable only by the same one.
    const std::vector<std::string> names = analysis::BuiltinMetricNames();
    const std::optional<double> index = Value(v, kValMetric);
    QK_RETURN_IF_NOT(!index || (*index >= 0 && *index < static_cast<double>(names.size())),
                     StatusCode::kInvalidArgument, "{}: '{}' is {}, not a metric", o.resume,
                     kValMetric, *index);
    const std::string theirs =
        index ? names[static_cast<size_t>(*index)] : (validation.has_labels ? "top1" : "agreement");
    QK_RETURN_IF_NOT(
        theirs == result->metric, StatusCode::kInvalidArgument,
        "{}: the checkpoint kept its best parameters by {}, this run validates by {} (continue it with "
        "--metric {})",
        o.resume, theirs, result->metric, theirs);
  }
  best->parameters = extras.best;
  best->score = ScoreOf(v, kBestMetric, kBestTiebreak);
  if (best->parameters.empty()) best->score.reset();
  QK_ASSIGN_OR_RETURN(result->best_step, CountValue(v, kBestStep, o.resume));
  QK_RETURN_IF_NOT(result->best_step <= trainer.steps_done(), StatusCode::kInvalidArgument,
                   "{}: '{}' is {}, after the checkpoint's step {} (a damaged checkpoint)",
                   o.resume, kBestStep, result->best_step, trainer.steps_done());
  result->val_ptq = ScoreOf(v, kValPtq, kValPtqTiebreak);
  const bool share = result->higher_is_better;  // the share metrics; rel_mse is an error
  QK_RETURN_IF_ERROR(CheckScore(best->score, share, kBestMetric, o.resume));
  QK_RETURN_IF_ERROR(CheckScore(result->val_ptq, share, kValPtq, o.resume));
  QK_RETURN_IF_NOT(trainer.steps_done() <= total_steps, StatusCode::kInvalidArgument,
                   "{}: the checkpoint is at step {}, past the {} steps asked for", o.resume,
                   trainer.steps_done(), total_steps);
  return Status::Ok();
}

Status SaveCheckpoint(distributed::Communicator& comm, const train::QatTrainer& trainer,
                      const std::string& path, const Best& best, const QatResult& result) {
  train::CheckpointExtras x;
  x.best = best.parameters;
  PutScore(best.score, kBestMetric, kBestTiebreak, &x.values);
  x.values[kBestStep] = static_cast<double>(result.best_step);
  PutScore(result.val_ptq, kValPtq, kValPtqTiebreak, &x.values);
  x.values[kHoldout] = static_cast<double>(result.holdout);
  x.values[kCheckpointLr] = result.lr;
  const std::vector<std::string> names = analysis::BuiltinMetricNames();
  const auto it = std::find(names.begin(), names.end(), result.metric);
  if (it != names.end()) x.values[kValMetric] = static_cast<double>(it - names.begin());
  return comm.Agree(comm.is_root() ? trainer.SaveCheckpoint(path, x) : Status::Ok(),
                    "saving the checkpoint");
}

Result<train::StepResult> TrainStep(const QatOptions& o, Launch& launch, const TrainingData& data,
                                    train::QatTrainer& trainer, int64_t s, int64_t steps_per_epoch,
                                    EpochOrder* order) {
  distributed::Communicator& comm = *launch.comm;
  const int64_t epoch = s / steps_per_epoch;
  if (epoch != order->epoch)
    order->perm = Permutation(data.samples, o.seed, epoch), order->epoch = epoch;
  const int64_t offset = (s % steps_per_epoch) * o.batch_size;
  const std::vector<int64_t> idx = RankSlice(order->perm, offset, comm.rank(), launch.local_batch);
  // Every rank reaches the step's one Agree: inside the reducer once its gradients exist, or
  // here with the error that stopped it before (so no rank waits for a gradient never sent).
  bool reduced = false;
  const std::string step_name = fmt::format("QAT step {}", s + 1);
  train::QatTrainer::GradientReducer reducer;
  if (launch.world > 1) {
    reducer = [&](std::vector<float>* gradients, train::StepResult* r) -> Status {
      reduced = true;
      QK_RETURN_IF_ERROR(comm.Agree(Status::Ok(), step_name));
      return AverageOverRanks(comm, gradients, r);
    };
  }
  Result<train::StepResult> stepped = [&]() -> Result<train::StepResult> {
    QK_ASSIGN_OR_RETURN(train::TrainingBatch batch, GatherSamples(*data.train, idx));
    if (!data.labels.empty()) {
      std::vector<int64_t> l;
      for (int64_t i : idx) l.push_back(data.labels[static_cast<size_t>(i)]);
      batch.labels = ir::Tensor::FromVector(ir::DType::kInt64, {launch.local_batch}, l);
    }
    return trainer.Step(batch, reducer);
  }();
  if (!stepped.ok() && launch.world > 1 && !reduced)
    QK_RETURN_IF_ERROR(comm.Agree(stepped.status(), step_name));
  return stepped;
}

Status Train(const QatOptions& o, Launch& launch, const TrainingData& data,
             const Validation& validation, train::QatTrainer& trainer,
             const std::string& checkpoint, TrainingRun* run, QatResult* result) {
  distributed::Communicator& comm = *launch.comm;
  const int64_t total = run->total_steps;
  // Keep-the-best, lexicographic (Better): a step replaces the kept parameters only when it beats
  // them on the metric, or ties there and has the lower rel_mse vs FP32. The PTQ start (step 0)
  // is the first kept; it stays only when no step beats it, which the summary then says.
  auto evaluate = [&](int64_t step) -> Status {
    if (!validation.metric) return Status::Ok();
    QK_ASSIGN_OR_RETURN(QatScore score, Validate(trainer, validation, comm));
    result->evals.push_back({step, score});
    if (!run->best.score || Better(score, *run->best.score, result->higher_is_better)) {
      run->best.score = score;
      result->best_step = step;
      QK_ASSIGN_OR_RETURN(run->best.parameters, trainer.Parameters());
    }
    return Status::Ok();
  };
  if (trainer.steps_done() == 0) {
    QK_RETURN_IF_ERROR(evaluate(0));
    if (!result->evals.empty()) result->val_ptq = result->evals.back().score;
  }
  const int64_t eval_every = o.eval_every > 0 ? o.eval_every : result->steps_per_epoch;
  Progress bar("qat", total - trainer.steps_done(), "steps");
  if (!o.progress || !comm.is_root()) bar.set_enabled(false);
  run->first_step = trainer.steps_done();
  EpochOrder order;
  for (int64_t s = run->first_step; s < total; ++s) {
    const int64_t epoch = s / result->steps_per_epoch;
    const auto step_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    QK_ASSIGN_OR_RETURN(train::StepResult r,
                        TrainStep(o, launch, data, trainer, s, result->steps_per_epoch, &order));
    run->train_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    run->cpu_seconds += static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    if (s == run->first_step) result->first_loss = r.loss;
    result->final_loss = r.loss;
    run->log.push_back({s + 1, epoch, r});
    bar.set_note(fmt::format("  loss {:.4g}", r.loss));
    bar.Advance(1);
    if ((s + 1) % eval_every == 0 || s + 1 == total) {
      QK_RETURN_IF_ERROR(evaluate(s + 1));
      QK_RETURN_IF_ERROR(SaveCheckpoint(comm, trainer, checkpoint, run->best, *result));
    }
    if (o.stop_after > 0 && s + 1 - run->first_step >= o.stop_after && s + 1 < total) {
      QK_RETURN_IF_ERROR(SaveCheckpoint(comm, trainer, checkpoint, run->best, *result));
      result->paused = true;
      break;
    }
  }
  bar.Finish();
  return Status::Ok();
}

}  // namespace quantkit::pipelines::qat
