// `qat --lr auto`: the peak learning rate chosen on the validation data by short trial runs.
//
// Why: AdamW moves every weight by about lr per step whatever its size, so the right lr depends on
// the model's weight scale. The zoo trains best at 1e-4 to 1e-3, the shipped PP-OCRv4 recognizer
// at 1e-6 (1e-4 takes its exact match from 0.390 to 0.030, and from a SmoothQuant start 1e-5
// degrades it where 1e-6 takes it from 0.705 to 0.830; docs/qat.md). Hence the grid, then lower
// candidates only when none of the grid beats the start (no cost where the grid works). A trial is
// the run's schedule in miniature (the same warm-up share, cosine to 0 at its last step) from the
// PTQ start over the run's first batches, so an lr that diverges, or only overshoots, shows in the
// validation score at its end.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/check.h"
#include "common/progress.h"
#include "ir/clone.h"
#include "pipelines/qat/steps.h"
#include "quantkit/qat.h"

namespace quantkit::pipelines::qat {

namespace {

// Each trial runs about a twentieth of the run (so five cost a quarter), at least two steps to
// see the first update's effect and at most 50 (enough to tell a diverging lr from a good one).
constexpr int64_t kTrialShareDivisor = 20, kMinTrialSteps = 2, kMaxTrialSteps = 50;

}  // namespace

Result<double> ChooseLearningRate(const QatOptions& o, Launch& launch, const TrainingData& data,
                                  const Validation& validation, const ir::Model& student,
                                  const ir::Model& teacher,
                                  const std::vector<std::string>& parameters,
                                  const train::TrainerOptions& run_options, QatResult* result) {
  QK_RETURN_IF_NOT(
      validation.metric != nullptr, StatusCode::kInvalidArgument,
      "--lr auto chooses on validation data, and this run has none: give --val, or leave --holdout at "
      "its default");
  const auto start = std::chrono::steady_clock::now();
  LrSearch search;
  search.steps =
      std::clamp(run_options.total_steps / kTrialShareDivisor, kMinTrialSteps, kMaxTrialSteps);
  search.steps = std::min(search.steps, std::max<int64_t>(run_options.total_steps, 1));
  std::optional<QatScore> ptq;
  auto trial = [&](double lr, Progress* bar) -> Status {
    const auto trial_start = std::chrono::steady_clock::now();
    train::TrainerOptions t = run_options;
    t.lr = lr;
    t.total_steps = search.steps;
    t.warmup_steps =
        static_cast<int64_t>(std::floor(o.warmup_fraction * static_cast<double>(search.steps)));
    QK_ASSIGN_OR_RETURN(ir::Model s, ir::CloneModel(student));
    QK_ASSIGN_OR_RETURN(ir::Model f, ir::CloneModel(teacher));
    QK_ASSIGN_OR_RETURN(std::unique_ptr<train::QatTrainer> trainer,
                        train::QatTrainer::Create(std::move(s), std::move(f), parameters, t));
    if (!ptq) {
      QK_ASSIGN_OR_RETURN(ptq, Validate(*trainer, validation, *launch.comm));
    }
    EpochOrder order;
    for (int64_t step = 0; step < search.steps; ++step) {
      QK_RETURN_IF_ERROR(
          TrainStep(o, launch, data, *trainer, step, result->steps_per_epoch, &order).status());
      bar->Advance(1);
    }
    QK_ASSIGN_OR_RETURN(QatScore score, Validate(*trainer, validation, *launch.comm));
    search.trials.push_back(
        {lr, score,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_start).count()});
    bar->set_note(fmt::format("  lr {:g} done", lr));
    return Status::Ok();
  };
  const bool show = o.progress && launch.comm->is_root();
  {
    Progress bar("qat --lr auto",
                 static_cast<int64_t>(std::size(QatOptions::kLrCandidates)) * search.steps,
                 "steps");
    bar.set_enabled(show);
    for (double lr : QatOptions::kLrCandidates) QK_RETURN_IF_ERROR(trial(lr, &bar));
    bar.Finish();
  }
  // The best trial; on equal scores the smaller lr (the candidates ascend, and Better is strict).
  const LrTrial* best = &search.trials.front();
  for (const LrTrial& t : search.trials) {
    if (Better(t.score, best->score, result->higher_is_better)) best = &t;
  }
  search.ptq = *ptq;
  search.beat_ptq = Better(best->score, *ptq, result->higher_is_better);
  search.chosen = best->lr;
  if (!search.beat_ptq) {
    // Even the smallest moved the model away from its start: the lr lies lower (PP-OCRv4 rec: 1e-5
    // degrades it, 1e-6 improves it). Down the smaller candidates until one beats the start; none
    // does: the smallest, which moves the model least (keep-the-best still guards the run).
    Progress bar("qat --lr auto, below 1e-5",
                 static_cast<int64_t>(std::size(QatOptions::kLrCandidatesBelow)) * search.steps,
                 "steps");
    bar.set_enabled(show);
    search.chosen = QatOptions::kLrCandidatesBelow[std::size(QatOptions::kLrCandidatesBelow) - 1];
    for (double lr : QatOptions::kLrCandidatesBelow) {
      QK_RETURN_IF_ERROR(trial(lr, &bar));
      if (Better(search.trials.back().score, *ptq, result->higher_is_better)) {
        search.beat_ptq = true;
        search.chosen = lr;
        break;
      }
    }
    bar.Finish();
  }
  search.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->lr_search = search;
  result->lr = search.chosen;
  return search.chosen;
}

Result<bool> ResolveLearningRate(const QatOptions& o, const TrainingData& data, QatResult* result) {
  using LrRule = QatOptions::LrRule;
  result->lr = o.trainer.lr;
  switch (o.lr_rule) {
    case LrRule::kAuto:
      return true;
    case LrRule::kGiven:
      result->lr_source = "--lr";
      return false;
    case LrRule::kDefault:
      break;
  }
  if (!o.resume.empty()) {
    // The run continues at the lr its schedule and optimizer state were made with, not at a fresh
    // choice (which could differ) or the fixed default.
    QK_ASSIGN_OR_RETURN(const auto values, train::ReadCheckpointValues(o.resume));
    const auto it = values.find(kCheckpointLr);
    if (it != values.end()) {
      QK_RETURN_IF_NOT(it->second > 0 && it->second <= quantkit::QatOptions::kMaxLr,
                       StatusCode::kInvalidArgument,
                       "{}: '{}' is {:g}, not a learning rate in (0, {:g}] (a damaged checkpoint)",
                       o.resume, kCheckpointLr, it->second, quantkit::QatOptions::kMaxLr);
      result->lr = it->second;
      result->lr_source = "the checkpoint's (--resume; --lr gives another)";
    } else {
      result->lr_source = "the default; the checkpoint records no lr (--lr gives another)";
    }
    return false;
  }
  if (data.holdout > 0 || !o.val.empty()) return true;
  result->lr_source = "the default, not chosen: nothing to validate on (--val, or --lr)";
  return false;
}

}  // namespace quantkit::pipelines::qat
