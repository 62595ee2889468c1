// quantkit::Qat (include/quantkit/qat.h): the public QAT options converted once (names parsed,
// every check before any work), pipelines::RunQat, and its report with the text the CLI prints.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "api/internal.h"
#include "common/check.h"
#include "common/progress.h"
#include "pipelines/qat/qat.h"
#include "quant/method.h"
#include "quantkit/qat.h"

namespace quantkit {
namespace {

Result<pipelines::QatOptions> ToQatOptions(const QatOptions& o) {
  pipelines::QatOptions q;
  q.model = o.model;
  q.teacher = o.teacher;
  q.data = o.data;
  q.output_dir = o.output_dir;
  QK_ASSIGN_OR_RETURN(q.image, api::ToImageOptions(o.image));
  q.labels = o.labels;
  q.samples = o.samples;
  q.plan = o.plan;
  QK_ASSIGN_OR_RETURN(q.method, quant::ParseMethod(o.method));
  q.calib_data = o.calib_data;
  q.calib_samples = o.calib_samples;
  QK_RETURN_IF_NOT(o.weights == "per-channel" || o.weights == "per-tensor",
                   StatusCode::kInvalidArgument, "--weights must be per-channel or per-tensor");
  q.placement.per_channel_weights = o.weights == "per-channel";
  q.recompute_weight_scales = !o.frozen_weight_scales;
  q.learn_activation_scales = o.learn_activation_scales;
  q.steps = o.steps;
  q.epochs = o.epochs;
  q.batch_size = o.batch_size;
  QK_RETURN_IF_NOT(
      std::isfinite(o.lr) && o.lr >= 0 && o.lr <= QatOptions::kMaxLr, StatusCode::kInvalidArgument,
      "the learning rate must be in (0, {:g}] (or 0: chosen), got {:g}", QatOptions::kMaxLr, o.lr);
  QK_RETURN_IF_NOT(std::isfinite(o.temperature) && o.temperature >= QatOptions::kMinTemperature &&
                       o.temperature <= QatOptions::kMaxTemperature,
                   StatusCode::kInvalidArgument,
                   "the KL temperature must be in [{:g}, {:g}], got {:g}",
                   QatOptions::kMinTemperature, QatOptions::kMaxTemperature, o.temperature);
  QK_RETURN_IF_NOT(std::isfinite(o.feature_weight) && o.feature_weight >= 0 &&
                       o.feature_weight <= QatOptions::kMaxLossWeight,
                   StatusCode::kInvalidArgument,
                   "the feature weight must be in [0, {:g}], got {:g}", QatOptions::kMaxLossWeight,
                   o.feature_weight);
  QK_RETURN_IF_NOT(std::isfinite(o.weight_decay) && o.weight_decay >= 0 && o.weight_decay <= 1,
                   StatusCode::kInvalidArgument, "the weight decay must be in [0, 1], got {:g}",
                   o.weight_decay);
  QK_RETURN_IF_NOT(!(o.lr_auto && o.lr > 0), StatusCode::kInvalidArgument,
                   "lr {:g} and lr auto: give one of them", o.lr);
  using LrRule = pipelines::QatOptions::LrRule;
  q.lr_rule = o.lr_auto ? LrRule::kAuto : o.lr > 0 ? LrRule::kGiven : LrRule::kDefault;
  q.trainer.lr = o.lr > 0 ? o.lr : QatOptions::kDefaultLr;
  QK_RETURN_IF_NOT(o.warmup_steps >= 0, StatusCode::kInvalidArgument,
                   "--warmup must be >= 0, got {}", o.warmup_steps);
  q.trainer.warmup_steps = o.warmup_steps;
  if (o.optimizer == "adamw") {
    q.trainer.optimizer = train::OptimizerKind::kAdamW;
  } else if (o.optimizer == "sgd") {
    q.trainer.optimizer = train::OptimizerKind::kSgd;
  } else {
    return Status(StatusCode::kInvalidArgument,
                  "--optimizer must be adamw or sgd, got '" + o.optimizer + "'");
  }
  q.trainer.weight_decay = o.weight_decay;
  const std::string& l = o.loss;
  QK_RETURN_IF_NOT(l == "mse" || l == "kl" || l == "ce" || l == "ce+kl" || l == "ce+mse",
                   StatusCode::kInvalidArgument,
                   "--loss must be mse, kl, ce, ce+kl or ce+mse, got '{}'", l);
  q.trainer.distill =
      l.find("kl") != std::string::npos ? train::DistillLoss::kKl : train::DistillLoss::kMse;
  q.trainer.distill_weight = l == "ce" ? 0.0 : 1.0;
  q.trainer.label_weight = l.rfind("ce", 0) == 0 ? 1.0 : 0.0;
  q.trainer.temperature = o.temperature;
  q.trainer.feature_tensors = o.features;
  q.trainer.feature_weight = o.feature_weight;
  if (!o.features.empty() && q.trainer.feature_weight <= 0) q.trainer.feature_weight = 1.0;
  q.seed = o.seed;
  q.val = o.val;
  q.val_samples = o.val_samples;
  q.holdout = o.holdout;
  q.metric = o.metric;
  q.eval_every = o.eval_every;
  q.resume = o.resume;
  q.stop_after = o.stop_after;
  QK_ASSIGN_OR_RETURN(q.floats, api::ToFloatOverride(o.floats));
  QK_ASSIGN_OR_RETURN(q.weight_storage, passes::ParseWeightStorage(o.floats.weight_storage));
  q.progress = o.progress;
  QK_ASSIGN_OR_RETURN(q.distributed, api::ToDistributedOptions(o.distributed));
  return q;
}

}  // namespace

Result<QatReport> Qat(const QatOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::QatOptions q, ToQatOptions(options));
  QK_ASSIGN_OR_RETURN(pipelines::QatResult r, pipelines::RunQat(q));
  QatReport report;
  report.summary = r.summary;
  report.warnings = r.warnings;
  report.written = r.written;
  report.metric = r.metric;
  if (r.val_ptq) report.val_ptq = r.val_ptq->metric;
  if (r.val_best) report.val_best = r.val_best->metric;
  report.best_step = r.best_step;
  report.steps = r.steps;
  report.lr = r.lr;
  report.paused = r.paused;
  report.seconds = r.seconds;
  report.peak_rss_bytes = r.peak_rss_bytes;
  api::SetRank(r.rank, &report);
  if (report.rank != 0) return report;  // rank 0 wrote and reports
  report.footer =
      fmt::format("  {:.1f} s, peak RSS {}\n", r.seconds, FormatBytes(r.peak_rss_bytes));
  for (const std::string& f : r.written) report.footer += "wrote " + f + "\n";
  report.text = r.summary + report.footer;
  return report;
}

}  // namespace quantkit
