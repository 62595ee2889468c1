// QAT stage 8, on rank 0: the fine-tuned float model, then the plan and Q/DQ model built from
// it, and the reports (training_log.json, training.svg, summary.txt).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "formats/ranges.h"
#include "formats/trt_cache.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/evaluate.h"
#include "pipelines/qat/plot.h"
#include "pipelines/qat/stages.h"

namespace quantkit::pipelines::qat {

namespace {

namespace fs = std::filesystem;

void SetInitializers(ir::Graph& g, const std::vector<runtime::NamedTensor>& values) {
  for (const runtime::NamedTensor& v : values) {
    ir::Value* target = g.FindValue(v.name);
    if (target == nullptr || !target->initializer.has_value()) continue;  // learned scales: not in g
    ir::Tensor t = v.tensor;
    t.name = v.name;
    target->initializer = std::move(t);
  }
}

nlohmann::json TrainingLog(const QatOptions& o, const StartPlan& plan, const train::TrainerOptions& topts,
                           const TrainingData& data, const TrainingRun& run, const QatResult& result) {
  nlohmann::json history = nlohmann::json::array();
  for (const StepLog& s : run.log) {
    history.push_back({{"step", s.step}, {"epoch", s.epoch}, {"loss", s.result.loss},
                       {"distill", s.result.distill}, {"label", s.result.label},
                       {"feature", s.result.feature}, {"lr", s.result.lr}});
  }
  nlohmann::json log{{"model", o.model},
                     {"data", data.train->Describe()},
                     {"plan", o.plan.empty() ? "calibrated: " + plan.plan.provenance.method : o.plan},
                     {"loss", LossName(topts)},
                     {"optimizer", topts.optimizer == train::OptimizerKind::kSgd ? "sgd" : "adamw"},
                     {"lr", topts.lr},
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
                     {"best_step", result.best_step},
                     {"history", history}};
  nlohmann::json evals = nlohmann::json::array();
  for (const QatEval& e : result.evals) evals.push_back({{"step", e.step}, {"value", e.metric}});
  log["evals"] = evals;
  if (result.val_ptq) log["val_ptq"] = *result.val_ptq;
  if (result.val_best) log["val_best"] = *result.val_best;
  if (result.val_exported) log["val_exported"] = *result.val_exported;
  return log;
}

std::string Summary(const QatOptions& o, const TrainingData& data, const QatResult& result,
                    quant::FloatDType float_dtype) {
  std::string sum = fmt::format(
      "qat: {} steps ({:.2f} epochs of {} samples, batch {}), loss {:.4g} -> {:.4g}, {:.3f} s/step ({:.3f} s CPU)\n",
      result.steps, static_cast<double>(result.steps) / static_cast<double>(result.steps_per_epoch), data.samples,
      o.batch_size, result.first_loss, result.final_loss, result.seconds_per_step, result.cpu_seconds_per_step);
  sum += fmt::format("  {} BatchNormalization folded, {} weight and {} activation fake-quant pairs, {} parameters\n",
                     result.folded_batch_norms, result.weight_pairs, result.activation_pairs, result.parameters);
  if (result.val_ptq && result.val_best) {
    sum += fmt::format("  validation {}: PTQ {:.2f}% -> QAT {:.2f}% (best at step {})\n", result.metric,
                       100 * *result.val_ptq, 100 * *result.val_best, result.best_step);
  }
  sum += fmt::format("  model.qdq.onnx: {}\n", result.export_summary);
  if (result.val_exported) {
    sum += fmt::format(
        "  validation {} of model.qdq.onnx as TensorRT computes it (float part in {}): {:.2f}%\n",
        result.metric, quant::FloatDTypeName(float_dtype), 100 * *result.val_exported);
  }
  return sum;
}

// The --val metric (top-1 with labels, else argmax agreement with the FP32 model) of the written
// model, run by the interpreter as TensorRT computes it. Rank 0 alone, one process.
Result<double> ValidateExported(const QatOptions& o, const std::string& qdq_path,
                                const std::string& metric) {
  EvalOptions eval;
  eval.model = qdq_path;
  eval.reference_model = o.model;
  eval.data = o.val;
  eval.image = o.image;
  eval.samples = o.val_samples;
  eval.batch_size = o.batch_size;
  eval.progress = false;
  eval.single_process = true;
  QK_ASSIGN_OR_RETURN(EvalResult r, Evaluate(eval));
  if (metric == "top1" && r.top1) return *r.top1;
  QK_RETURN_IF_NOT(r.agreement.has_value(), StatusCode::kInternal,
                   "validating {}: no agreement with {}", qdq_path, o.model);
  return r.agreement->argmax_agreement;
}

}  // namespace

const char* LossName(const train::TrainerOptions& t) {
  if (t.label_weight > 0 && t.distill_weight > 0) return "cross-entropy+distillation";
  if (t.label_weight > 0) return "cross-entropy";
  return t.distill == train::DistillLoss::kMse ? "distillation-mse" : "distillation-kl";
}

Status WriteResults(const QatOptions& o, const StartPlan& plan, const Graphs& graphs,
                    const train::TrainerOptions& topts, const TrainingData& data, const train::QatTrainer& trainer,
                    const TrainingRun& run, std::chrono::steady_clock::time_point start, ArtifactSet* out,
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
                       "learned scale of '{}' ended at {}: not a usable scale (lower --lr)", tensor, s);
      final_plan.SetScale(tensor, {s}, -1, quant::TensorRole::kActivation, "qat-lsq");
    }
  }
  final_plan.provenance.method =
      fmt::format("qat(from={}, loss={}, steps={}, batch={}, final_loss={:.6g})",
                  plan.plan.provenance.method.empty() ? "plan" : plan.plan.provenance.method, LossName(topts),
                  result->steps, o.batch_size, result->final_loss);
  final_plan.provenance.data_description = data.train->Describe();
  final_plan.provenance.data_sha256 = data.train->Fingerprint();
  final_plan.provenance.num_samples = result->steps * o.batch_size;
  // Written as every writer writes (INT8 weight storage, the plan's float dtype); trained in FP32.
  final_plan.float_precision = plan.plan.float_precision;
  passes::ApplyPlanOptions writer = plan.sim;
  writer.weight_storage = o.weight_storage;
  ir::Model qdq = std::move(tuned);
  QK_ASSIGN_OR_RETURN(passes::PassReport applied,
                      passes::RunPass(qdq, passes::ApplyPlan(&final_plan, writer)));
  QK_RETURN_IF_ERROR(quant::ValidatePlan(final_plan));
  // Staged, not yet committed: validated there, so a failed check leaves no output set.
  const std::string qdq_path = out->Stage("model.qdq.onnx");
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(qdq, qdq_path));
  result->export_summary = applied.summary;
  if (data.val) {
    QK_ASSIGN_OR_RETURN(result->val_exported, ValidateExported(o, qdq_path, result->metric));
  }
  QK_RETURN_IF_ERROR(formats::WriteTrtCache(out->Stage("calib.cache"), final_plan, {}));
  QK_RETURN_IF_ERROR(formats::WritePlanJson(out->Stage("plan.json"), final_plan));

  result->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->peak_rss_bytes = PeakRssBytes();
  const nlohmann::json log = TrainingLog(o, plan, topts, data, run, *result);
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("training_log.json"), log.dump(1) + "\n"));
  TrainingCurve curve;
  for (const StepLog& s : run.log) curve.loss.emplace_back(s.step, s.result.loss);
  for (const QatEval& e : result->evals) curve.val.emplace_back(e.step, e.metric);
  curve.title = fmt::format("qat {}: {} loss per step", fs::path(o.model).filename().string(), LossName(topts));
  curve.metric = result->metric;
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("training.svg"), TrainingSvg(curve)));

  result->summary = Summary(o, data, *result, final_plan.float_precision.dtype);
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("summary.txt"), result->summary));
  QK_ASSIGN_OR_RETURN(result->written, out->Commit());
  result->written.push_back((dir / "checkpoint.npz").string());
  return Status::Ok();
}

}  // namespace quantkit::pipelines::qat
