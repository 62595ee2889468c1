// QAT step 8, on rank 0: the fine-tuned float model, then the plan and Q/DQ model built from
// it, and the reports (training_log.json, training.svg, summary.txt).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "formats/ranges.h"
#include "formats/trt_cache.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/evaluate/evaluate.h"
#include "pipelines/qat/plot.h"
#include "pipelines/qat/steps.h"
#include "pipelines/quantized_artifacts.h"

namespace quantkit::pipelines::qat {

namespace {

namespace fs = std::filesystem;

void SetInitializers(ir::Graph& g, const std::vector<runtime::NamedTensor>& values) {
  for (const runtime::NamedTensor& v : values) {
    ir::Value* target = g.FindValue(v.name);
    if (target == nullptr || !target->initializer.has_value())
      continue;  // learned scales: not in g
    ir::Tensor t = v.tensor;
    t.name = v.name;
    target->initializer = std::move(t);
  }
}

nlohmann::json TrainingLog(const QatOptions& o, const StartPlan& plan,
                           const train::TrainerOptions& topts, const TrainingData& data,
                           const TrainingRun& run, const QatResult& result) {
  nlohmann::json history = nlohmann::json::array();
  for (const StepLog& s : run.log) {
    history.push_back({{"step", s.step},
                       {"epoch", s.epoch},
                       {"loss", s.result.loss},
                       {"distill", s.result.distill},
                       {"label", s.result.label},
                       {"feature", s.result.feature},
                       {"lr", s.result.lr}});
  }
  nlohmann::json log{
      {"model", o.model},
      {"data", data.train->Describe()},
      {"plan", o.plan.empty() ? "calibrated: " + plan.plan.provenance.method : o.plan},
      {"loss", LossName(topts)},
      {"optimizer", topts.optimizer == train::OptimizerKind::kSgd ? "sgd" : "adamw"},
      {"lr", topts.lr},
      {"lr_source", result.lr_search ? "chosen" : result.lr_source},
      {"distill_on", result.distill_on},
      {"label_on", result.label_on},
      {"warmup_steps", topts.warmup_steps},
      {"batch_size", o.batch_size},
      {"seed", o.seed},
      {"steps", result.steps},
      {"steps_per_epoch", result.steps_per_epoch},
      {"seconds", result.seconds},
      {"seconds_per_step", result.seconds_per_step},
      {"cpu_seconds_per_step", result.cpu_seconds_per_step},
      {"peak_rss_bytes", result.peak_rss_bytes},
      {"metric", result.metric},
      {"higher_is_better", result.higher_is_better},
      {"tiebreak", result.tiebreak},
      {"val_data", result.val_data},
      {"holdout", result.holdout},
      {"best_step", result.best_step},
      {"warnings", result.warnings},
      {"history", history}};
  // Non-finite scores (a diverged run's rel_mse) are JSON null.
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json evals = nlohmann::json::array();
  for (const QatEval& e : result.evals) {
    nlohmann::json j{{"step", e.step}, {"value", number(e.score.metric)}};
    if (e.score.tiebreak) j["tiebreak"] = number(*e.score.tiebreak);
    evals.push_back(j);
  }
  log["evals"] = evals;
  auto put = [&](const char* key, const std::optional<QatScore>& s) {
    if (!s) return;
    log[key] = number(s->metric);
    if (s->tiebreak) log[std::string(key) + "_tiebreak"] = number(*s->tiebreak);
  };
  if (result.lr_search) {
    const LrSearch& search = *result.lr_search;
    nlohmann::json trials = nlohmann::json::array();
    for (const LrTrial& t : search.trials) {
      nlohmann::json j{{"lr", t.lr}, {"value", number(t.score.metric)}, {"seconds", t.seconds}};
      if (t.score.tiebreak) j["tiebreak"] = number(*t.score.tiebreak);
      trials.push_back(j);
    }
    log["lr_search"] = {{"chosen", search.chosen},          {"steps", search.steps},
                        {"beat_ptq", search.beat_ptq},      {"seconds", search.seconds},
                        {"ptq", number(search.ptq.metric)}, {"trials", trials}};
    if (search.ptq.tiebreak) log["lr_search"]["ptq_tiebreak"] = number(*search.ptq.tiebreak);
  }
  put("val_ptq", result.val_ptq);
  put("val_best", result.val_best);
  put("val_exported", result.val_exported);
  return log;
}

// "top1 vs labels", "agreement with FP32", "frame_agreement with FP32", "rel_mse vs FP32".
std::string MetricTitle(const std::string& metric) {
  const bool agreement =
      metric == "agreement" || metric == "frame_agreement" || metric == "decode_agreement";
  return metric + (metric == "top1" ? " vs labels" : agreement ? " with FP32" : " vs FP32");
}

// A score as the summary prints it: shares in percent, errors in 3 significant digits, the
// tie-breaker beside.
std::string FormatScore(const QatResult& r, const QatScore& s) {
  std::string out =
      r.higher_is_better ? fmt::format("{:.2f}%", 100 * s.metric) : fmt::format("{:.3g}", s.metric);
  if (s.tiebreak) out += fmt::format(" ({} {:.3g})", r.tiebreak, *s.tiebreak);
  return out;
}

// What the kept parameters are against the PTQ start, in words.
std::string Verdict(const QatResult& r) {
  if (r.best_step == 0) return "the PTQ start was kept";
  if (r.val_best->metric != r.val_ptq->metric)
    return fmt::format("beats the PTQ start on {}", r.metric);
  return fmt::format("ties the PTQ start on {} and beats it on {}", r.metric, r.tiebreak);
}

// --lr auto's line: every trial's score against the PTQ start, and the choice.
std::string FormatLrSearch(const QatResult& r, const LrSearch& search) {
  std::string s = fmt::format(
      "  lr auto: {:g} chosen on {} from {} trials of {} steps ({:.1f} s): PTQ start {}",
      search.chosen, r.metric, search.trials.size(), search.steps, search.seconds,
      FormatScore(r, search.ptq));
  for (const LrTrial& t : search.trials)
    s += fmt::format(", lr {:g} {}", t.lr, FormatScore(r, t.score));
  if (!search.beat_ptq) s += "; no trial beat the PTQ start, so the smallest lr";
  return s + "\n";
}

std::string Summary(const QatOptions& o, const TrainingData& data, const QatResult& result,
                    quant::FloatDType float_dtype) {
  std::string sum = fmt::format(
      "qat: {} steps ({:.2f} epochs of {} samples, batch {}), loss {:.4g} -> {:.4g}, {:.3f} s/step ({:.3f} s CPU)\n",
      result.steps, static_cast<double>(result.steps) / static_cast<double>(result.steps_per_epoch),
      data.samples, o.batch_size, result.first_loss, result.final_loss, result.seconds_per_step,
      result.cpu_seconds_per_step);
  sum += fmt::format(
      "  {} BatchNormalization folded, {} weight and {} activation fake-quant pairs, {} parameters\n",
      result.folded_batch_norms, result.weight_pairs, result.activation_pairs, result.parameters);
  if (!result.distill_on.empty()) sum += fmt::format("  distillation: {}\n", result.distill_on);
  if (!result.label_on.empty()) sum += fmt::format("  cross-entropy: {}\n", result.label_on);
  if (!result.metric.empty()) {
    sum += fmt::format("  validation ({}, {} is better{}) on {}:", MetricTitle(result.metric),
                       result.higher_is_better ? "higher" : "lower",
                       result.tiebreak.empty()
                           ? ""
                           : fmt::format("; ties broken by {}", MetricTitle(result.tiebreak)),
                       result.val_data);
    if (result.val_ptq && result.val_best) {
      sum += fmt::format(" PTQ {} -> QAT {}, best at step {}: {}",
                         FormatScore(result, *result.val_ptq),
                         FormatScore(result, *result.val_best), result.best_step, Verdict(result));
      // The kept step is not the last: what the last one scored, so the cost of writing it shows.
      if (!result.evals.empty() && result.evals.back().step != result.best_step) {
        sum += fmt::format(" (last validation, step {}: {})", result.evals.back().step,
                           FormatScore(result, result.evals.back().score));
      }
    }
    sum += "\n";
  }
  if (result.lr_search) {
    sum += FormatLrSearch(result, *result.lr_search);
  } else {
    sum += fmt::format("  lr {:g}: {}\n", result.lr, result.lr_source);
  }
  for (const std::string& w : result.warnings) sum += "  WARNING: " + w + "\n";
  sum += fmt::format("  model.qdq.onnx: {}\n", result.export_summary);
  if (result.val_exported) {
    sum += fmt::format(
        "  validation of model.qdq.onnx as TensorRT computes it (float part in {}): {} {}\n",
        quant::FloatDTypeName(float_dtype), result.metric,
        FormatScore(result, *result.val_exported));
  }
  return sum;
}

// The validation score (metric and tie-breaker, on the same samples) of the written model, run by
// the interpreter as TensorRT computes it. Rank 0 alone, one process.
Result<QatScore> ValidateExported(const QatOptions& o, const TrainingData& data,
                                  const std::string& qdq_path, const QatResult& result) {
  EvalOptions eval;
  eval.model = qdq_path;
  eval.reference_model = o.teacher_path();  // what training validated against
  eval.data = o.val.empty() ? o.data : o.val;
  eval.first_sample = data.val_first_sample;
  eval.samples = o.val.empty() ? data.holdout : o.val_samples;
  eval.image = o.image;
  eval.batch_size = o.batch_size;
  eval.progress = false;
  eval.single_process = true;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric,
                      analysis::MakeMetric(result.metric));
  std::unique_ptr<analysis::Metric> tiebreak;
  if (!result.tiebreak.empty()) {
    QK_ASSIGN_OR_RETURN(tiebreak, analysis::MakeMetric(result.tiebreak));
  }
  eval.metrics.push_back(metric.get());
  if (tiebreak) eval.metrics.push_back(tiebreak.get());
  QK_RETURN_IF_ERROR(Evaluate(eval).status());  // the metrics hold the values
  QatScore s;
  s.metric = metric->Value();
  if (tiebreak) s.tiebreak = tiebreak->Value();
  return s;
}

}  // namespace

const char* LossName(const train::TrainerOptions& t) {
  if (t.label_weight > 0 && t.distill_weight > 0) return "cross-entropy+distillation";
  if (t.label_weight > 0) return "cross-entropy";
  return t.distill == train::DistillLoss::kMse ? "distillation-mse" : "distillation-kl";
}

Status WriteResults(const QatOptions& o, const StartPlan& plan, const Graphs& graphs,
                    const train::TrainerOptions& topts, const TrainingData& data,
                    const train::QatTrainer& trainer, const TrainingRun& run,
                    std::chrono::steady_clock::time_point start, ArtifactSet* out,
                    QatResult* result) {
  const fs::path dir(o.output_dir);
  QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> final_params, trainer.Parameters());
  QK_ASSIGN_OR_RETURN(ir::Model tuned, LoadFolded(o.model, nullptr));
  SetInitializers(*tuned.graph, final_params);
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(tuned, out->Stage("model.float.onnx")));
  quant::QuantPlan final_plan = plan.train;
  for (const auto& [tensor, scale_name] : graphs.learned_scales) {
    for (const runtime::NamedTensor& p : final_params) {
      if (p.name != scale_name) continue;
      const float s = p.tensor.data_as<float>()[0];
      QK_RETURN_IF_NOT(std::isfinite(s) && s > 0, StatusCode::kInvalidArgument,
                       "learned scale of '{}' ended at {}: not a usable scale (lower --lr)", tensor,
                       s);
      final_plan.SetScale(tensor, {s}, -1, quant::TensorRole::kActivation, "qat-lsq");
    }
  }
  final_plan.provenance.method =
      fmt::format("qat(from={}, loss={}, steps={}, batch={}, final_loss={:.6g})",
                  plan.plan.provenance.method.empty() ? "plan" : plan.plan.provenance.method,
                  LossName(topts), result->steps, o.batch_size, result->final_loss);
  final_plan.provenance.data_description = data.train->Describe();
  final_plan.provenance.data_sha256 = data.train->Fingerprint();
  final_plan.provenance.num_samples = result->steps * o.batch_size;
  // Written as every writer writes (INT8 weight storage, the plan's float dtype); trained in FP32.
  final_plan.float_precision = plan.plan.float_precision;
  passes::ApplyPlanOptions writer = plan.sim;
  writer.weight_storage = o.weight_storage;
  // Staged, not yet committed: checked below, so a failed check leaves no output set.
  QK_ASSIGN_OR_RETURN(
      passes::PassReport applied,
      StageQuantizedModel(std::move(tuned), writer, &final_plan, QuantizedFiles{}, out));
  QK_RETURN_IF_ERROR(quant::ValidatePlan(final_plan));
  result->export_summary = applied.summary;
  if (!result->metric.empty()) {
    QK_ASSIGN_OR_RETURN(result->val_exported,
                        ValidateExported(o, data, out->Stage("model.qdq.onnx"), *result));
    // Keep-the-best compares the trained graph's scores; the file written can still differ from it
    // (an op the interpreter trains otherwise than the exported Q/DQ computes): said, not hidden.
    if (result->val_ptq &&
        Better(*result->val_ptq, *result->val_exported, result->higher_is_better)) {
      result->warnings.push_back(fmt::format(
          "the written model.qdq.onnx scores {} on {}, worse than the PTQ start's {}: the exported model "
          "computes otherwise than the trained graph ({} at step {}); keep the PTQ model",
          FormatScore(*result, *result->val_exported), result->val_data,
          FormatScore(*result, *result->val_ptq),
          result->val_best ? FormatScore(*result, *result->val_best) : std::string("?"),
          result->best_step));
    }
  }

  result->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->peak_rss_bytes = PeakRssBytes();
  const nlohmann::json log = TrainingLog(o, plan, topts, data, run, *result);
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("training_log.json"), log.dump(1) + "\n"));
  TrainingCurve curve;
  for (const StepLog& s : run.log) curve.loss.emplace_back(s.step, s.result.loss);
  for (const QatEval& e : result->evals) curve.val.emplace_back(e.step, e.score.metric);
  curve.title = fmt::format("qat {}: {} loss per step", fs::path(o.model).filename().string(),
                            LossName(topts));
  curve.metric = result->metric;
  curve.val_is_share = result->higher_is_better;
  if (result->val_best) curve.best_step = result->best_step;
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("training.svg"), TrainingSvg(curve)));

  result->summary = Summary(o, data, *result, final_plan.float_precision.dtype);
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("summary.txt"), result->summary));
  QK_ASSIGN_OR_RETURN(result->written, out->Commit());
  result->written.push_back((dir / "checkpoint.npz").string());
  return Status::Ok();
}

}  // namespace quantkit::pipelines::qat
