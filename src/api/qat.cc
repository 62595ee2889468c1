// include/quantkit/qat.h over pipelines/qat/: the public options converted once (the optimizer,
// the loss and the method names parsed here), RunQat called, its result converted back.
#include "quantkit/qat.h"

#include <fmt/format.h>

#include "api/internal.h"
#include "common/check.h"
#include "common/progress.h"
#include "pipelines/qat/qat.h"
#include "quant/method.h"

namespace quantkit {
namespace {

Result<pipelines::QatOptions> ToQatOptions(const QatOptions& o) {
  pipelines::QatOptions q;
  q.model = o.model;
  q.data = o.data;
  QK_ASSIGN_OR_RETURN(q.image, api::ToImageOptions(o.image));
  q.labels = o.labels;
  q.samples = o.samples;
  q.plan = o.plan;
  QK_ASSIGN_OR_RETURN(q.method, quant::ParseMethod(o.method));
  q.calib_data = o.calib_data;
  q.calib_samples = o.calib_samples;
  q.placement = api::ToPlacementOptions(o.placement);
  q.epochs = o.epochs;
  q.steps = o.steps;
  q.batch_size = o.batch_size;
  q.seed = o.seed;
  train::TrainerOptions& t = q.trainer;
  if (o.optimizer == "adamw") {
    t.optimizer = train::OptimizerKind::kAdamW;
  } else if (o.optimizer == "sgd") {
    t.optimizer = train::OptimizerKind::kSgd;
  } else {
    return MakeStatus(StatusCode::kInvalidArgument, "--optimizer must be adamw or sgd, got '{}'",
                      o.optimizer);
  }
  t.lr = o.lr;
  t.weight_decay = o.weight_decay;
  t.warmup_steps = o.warmup_steps;
  const std::string& l = o.loss;
  QK_RETURN_IF_NOT(l == "mse" || l == "kl" || l == "ce" || l == "ce+kl" || l == "ce+mse",
                   StatusCode::kInvalidArgument,
                   "--loss must be mse, kl, ce, ce+kl or ce+mse, got '{}'", l);
  t.distill =
      l.find("kl") != std::string::npos ? train::DistillLoss::kKl : train::DistillLoss::kMse;
  t.distill_weight = l == "ce" ? 0.0 : 1.0;
  t.label_weight = l.rfind("ce", 0) == 0 ? 1.0 : 0.0;
  t.temperature = o.temperature;
  t.feature_tensors = o.feature_tensors;
  t.feature_weight = !o.feature_tensors.empty() && o.feature_weight <= 0 ? 1.0 : o.feature_weight;
  q.recompute_weight_scales = o.recompute_weight_scales;
  q.learn_activation_scales = o.learn_activation_scales;
  q.val = o.val;
  q.val_samples = o.val_samples;
  q.eval_every = o.eval_every;
  q.output_dir = o.output_dir;
  q.resume = o.resume;
  q.stop_after = o.stop_after;
  q.progress = o.progress;
  QK_ASSIGN_OR_RETURN(q.distributed, api::ToDistributedOptions(o.distributed));
  return q;
}

}  // namespace

Result<QatReport> Qat(const QatOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::QatOptions q, ToQatOptions(options));
  QK_ASSIGN_OR_RETURN(pipelines::QatResult r, pipelines::RunQat(q));
  QatReport report;
  report.metric = r.metric;
  report.val_ptq = r.val_ptq;
  report.val_best = r.val_best;
  report.best_step = r.best_step;
  for (const pipelines::QatEval& e : r.evals) report.evaluations.push_back({e.step, e.metric});
  report.steps = r.steps;
  report.steps_per_epoch = r.steps_per_epoch;
  report.first_loss = r.first_loss;
  report.final_loss = r.final_loss;
  report.seconds = r.seconds;
  report.seconds_per_step = r.seconds_per_step;
  report.cpu_seconds_per_step = r.cpu_seconds_per_step;
  report.peak_rss_bytes = r.peak_rss_bytes;
  report.paused = r.paused;
  report.written = r.written;
  report.summary = r.summary;
  report.text = r.summary +
                fmt::format("  {:.1f} s, peak RSS {}\n", r.seconds, FormatBytes(r.peak_rss_bytes));
  for (const std::string& f : r.written) report.text += "wrote " + f + "\n";
  report.rank = api::ToRankSummary(r.rank);
  return report;
}

}  // namespace quantkit
