// QAT stages 6 and 7: checkpoints (--resume, a checkpoint after each validation and at a pause)
// and the training loop with validation and keep-the-best.
#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "common/check.h"
#include "common/progress.h"
#include "pipelines/qat/stages.h"

namespace quantkit::pipelines::qat {

Status Resume(const QatOptions& o, int64_t total_steps, train::QatTrainer& trainer, Best* best,
              QatResult* result) {
  if (o.resume.empty()) return Status::Ok();
  QK_ASSIGN_OR_RETURN(train::CheckpointExtras extras, trainer.LoadCheckpoint(o.resume));
  best->parameters = extras.best;
  if (extras.values.count("best_metric")) best->metric = extras.values["best_metric"];
  if (extras.values.count("best_step"))
    result->best_step = static_cast<int64_t>(extras.values["best_step"]);
  if (extras.values.count("val_ptq")) result->val_ptq = extras.values["val_ptq"];
  QK_RETURN_IF_NOT(trainer.steps_done() <= total_steps, StatusCode::kInvalidArgument,
                   "{}: the checkpoint is at step {}, past the {} steps asked for", o.resume,
                   trainer.steps_done(), total_steps);
  return Status::Ok();
}

Status SaveCheckpoint(distributed::Communicator& comm, const train::QatTrainer& trainer,
                      const std::string& path, const Best& best, const QatResult& result) {
  train::CheckpointExtras x;
  x.best = best.parameters;
  x.values["best_metric"] = best.metric;
  x.values["best_step"] = static_cast<double>(result.best_step);
  if (result.val_ptq) x.values["val_ptq"] = *result.val_ptq;
  return comm.Agree(comm.is_root() ? trainer.SaveCheckpoint(path, x) : Status::Ok(),
                    "saving the checkpoint");
}

Status Train(const QatOptions& o, Launch& launch, const TrainingData& data,
             train::QatTrainer& trainer, const std::string& checkpoint, TrainingRun* run,
             QatResult* result) {
  distributed::Communicator& comm = *launch.comm;
  const int64_t total = run->total_steps;
  auto evaluate = [&](int64_t step) -> Status {
    if (!data.val) return Status::Ok();
    QK_ASSIGN_OR_RETURN(double m,
                        Validate(trainer, *data.val, o.batch_size, comm, &result->metric));
    result->evals.push_back({step, m});
    if (m > run->best.metric) {
      run->best.metric = m;
      result->best_step = step;
      QK_ASSIGN_OR_RETURN(run->best.parameters, trainer.Parameters());
    }
    return Status::Ok();
  };
  if (trainer.steps_done() == 0) {
    QK_RETURN_IF_ERROR(evaluate(0));
    if (!result->evals.empty()) result->val_ptq = result->evals.back().metric;
  }
  const int64_t eval_every = o.eval_every > 0 ? o.eval_every : result->steps_per_epoch;
  Progress bar("qat", total - trainer.steps_done(), "steps");
  if (!o.progress || !comm.is_root()) bar.set_enabled(false);
  run->first_step = trainer.steps_done();
  std::vector<int64_t> perm;
  int64_t perm_epoch = -1;
  for (int64_t s = run->first_step; s < total; ++s) {
    const int64_t epoch = s / result->steps_per_epoch;
    if (epoch != perm_epoch) perm = Permutation(data.samples, o.seed, epoch), perm_epoch = epoch;
    const int64_t offset = (s % result->steps_per_epoch) * o.batch_size;
    const std::vector<int64_t> idx = RankSlice(perm, offset, comm.rank(), launch.local_batch);
    const auto step_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
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
    QK_ASSIGN_OR_RETURN(train::StepResult r, std::move(stepped));
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
