#include "pipelines/calibrate/compare_methods.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/plan_eval.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "pipelines/calibrate/holdout.h"
#include "quant/method_amax.h"

namespace quantkit::pipelines {

Result<CompareMethodsResult> CompareMethods(const CompareMethodsOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompareMethodsResult r;
  std::vector<quant::MethodRequest> methods = options.methods;
  if (methods.empty()) methods = quant::AllMethods();
  analysis::PlanEvalOptions eval_options;
  eval_options.model = options.calibrate.model;
  CalibrateOptions base = options.calibrate;
  if (!options.holdout.empty()) {
    eval_options.data = options.holdout;
    eval_options.samples = options.holdout_samples;
  } else {
    QK_RETURN_IF_ERROR(HoldOutCalibrationTail(&base, &eval_options, options.holdout_samples));
  }
  eval_options.simulation.placement = options.calibrate.placement;
  eval_options.simulation.mode = analysis::PlacementMode::kTensorRT;
  // -o is locked (and its targets checked) before the evaluations, as calibrate does: a concurrent
  // run fails at once; the best method's files are staged and committed at the end.
  std::unique_ptr<ArtifactSet> out;
  if (!base.output_dir.empty() && !base.artifacts) {
    QK_ASSIGN_OR_RETURN(out, ArtifactSet::Open(base.output_dir, CalibrationArtifactNames(base)));
    base.artifacts = out.get();
  }
  QK_ASSIGN_OR_RETURN(auto evaluator, analysis::PlanEvaluator::Create(eval_options));
  r.holdout = evaluator->data_description();
  r.metric = options.metric.empty()
                 ? analysis::DefaultMetricName(evaluator->has_labels(), evaluator->class_output())
                 : options.metric;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(r.metric));
  QK_ASSIGN_OR_RETURN(analysis::TrialResult fp32, evaluator->EvaluateFp32({metric.get()}));
  r.fp32_value = fp32.metrics.at(r.metric);

  // One load, hash and collection for every method: each plan is BuildPlan over the same
  // statistics (no model run); only the best one's artifacts are written.
  CalibrateOptions c = base;
  c.output_dir.clear();
  c.stats_out.clear();
  QK_ASSIGN_OR_RETURN(PreparedCalibration prepared, PrepareCalibration(c));
  QK_ASSIGN_OR_RETURN(MethodSearch search,
                      SearchMethods(prepared, *evaluator, metric.get(), r.fp32_value, methods,
                                    {c.method, c.method_overrides}, options.per_tensor));
  r.scores = search.scores;
  r.best = r.scores[search.best].method;
  r.best_loss = search.score.loss;
  r.best_rel_mse = search.score.rel_mse;
  c = base;
  c.method = search.choice.method;
  c.method_overrides = search.choice.overrides;
  // The check of the plan written: on the held-out samples already read, FP32 outputs cached.
  c.check_evaluator = evaluator.get();
  c.check_origin = "held-out";  // the data description names the source (the CLI may default it)
  if (options.per_tensor) {
    r.tensor_changes = search.per_tensor.changes;
    r.tensor_trials = search.per_tensor.trials;
    r.tensor_candidates = search.per_tensor.candidates;
    r.tensor_loss = search.score.loss;
    r.tensor_rel_mse = search.score.rel_mse;
  }
  if (options.per_tensor && !c.ptq.stages.empty()) {
    QK_ASSIGN_OR_RETURN(BuiltPlan built, BuildPlan(prepared.statistics, prepared.model,
                                                   prepared.sites, {c.method, c.method_overrides}));
    // Each stage alone, then all of them in order: kept only when the held-out score improves.
    std::vector<std::vector<PtqStageSpec>> candidates;
    for (const PtqStageSpec& s : c.ptq.stages) candidates.push_back({s});
    if (c.ptq.stages.size() > 1) candidates.push_back(c.ptq.stages);
    r.ptq_trials.push_back({"", r.best_loss, r.best_rel_mse, 0});
    PlanScore best_score{r.best_loss, r.best_rel_mse};
    std::optional<ReadyPlan> best_plan;
    for (const std::vector<PtqStageSpec>& stages : candidates) {
      const auto trial_start = std::chrono::steady_clock::now();
      quant::QuantPlan plan = built.plan;
      PtqOptions ptq = c.ptq;
      ptq.stages = stages;
      QK_ASSIGN_OR_RETURN(
          PtqReport report,
          RunPtqStages(prepared.model, prepared.sites,
                       {c.data, c.image, c.samples, {c.method, c.method_overrides}}, ptq, &plan));
      QK_ASSIGN_OR_RETURN(analysis::TrialResult t, evaluator->EvaluatePlan(plan, {metric.get()}));
      const PlanScore score{metric->Loss(t.metrics.at(r.metric), r.fp32_value),
                            t.output.relative_mse()};
      r.ptq_trials.push_back(
          {PtqStagesText(stages), score.loss, score.rel_mse,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_start).count()});
      if (score < best_score) {
        best_score = score;
        best_plan = ReadyPlan{std::move(plan), std::move(report), built.warnings, std::nullopt, ""};
        r.ptq_best = PtqStagesText(stages);
      }
    }
    r.best_loss = best_score.loss;
    r.best_rel_mse = best_score.rel_mse;
    if (best_plan) {
      QK_ASSIGN_OR_RETURN(r.best_result, FinishCalibration(c, prepared, &*best_plan));
    } else {
      c.ptq.stages.clear();
      QK_ASSIGN_OR_RETURN(r.best_result, FinishCalibration(c, prepared));
    }
  } else {
    QK_ASSIGN_OR_RETURN(r.best_result, FinishCalibration(c, prepared));
  }
  if (out) {
    QK_ASSIGN_OR_RETURN(r.best_result.written, out->Commit());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Result<MethodSearch> SearchMethods(const PreparedCalibration& prepared,
                                   const analysis::PlanEvaluator& evaluator,
                                   analysis::Metric* metric, double fp32_value,
                                   const std::vector<quant::MethodRequest>& methods,
                                   const MethodChoice& asked, bool per_tensor,
                                   const std::function<bool()>& out_of_time) {
  QK_RETURN_IF_NOT(!methods.empty(), StatusCode::kInternal, "no method to choose from");
  MethodSearch search;
  analysis::AgreementMetric agreement;
  std::vector<analysis::Metric*> metrics{metric};
  if (metric->name() != "agreement") metrics.push_back(&agreement);
  std::vector<quant::QuantPlan> plans;
  for (size_t i = 0; i < methods.size(); ++i) {
    QK_ASSIGN_OR_RETURN(BuiltPlan built, BuildPlan(prepared.statistics, prepared.model,
                                                   prepared.sites, {methods[i], asked.overrides}));
    QK_ASSIGN_OR_RETURN(analysis::TrialResult t, evaluator.EvaluatePlan(built.plan, metrics));
    plans.push_back(std::move(built.plan));
    MethodScore s;
    s.method = quant::MethodLabel(methods[i]);
    s.value = t.metrics.at(metric->name());
    s.loss = metric->Loss(s.value, fp32_value);
    s.rel_mse = t.output.relative_mse();
    s.sqnr_db = t.output.sqnr_db();
    s.agreement = t.metrics.at("agreement");
    search.scores.push_back(s);
    const MethodScore& b = search.scores[search.best];
    if (s.loss < b.loss || (s.loss == b.loss && s.rel_mse < b.rel_mse)) search.best = i;
    if (i + 1 < methods.size() && out_of_time && out_of_time()) {
      search.stopped = true;
      break;
    }
  }
  search.choice = {methods[search.best], asked.overrides};
  search.method_score =
      search.score = {search.scores[search.best].loss, search.scores[search.best].rel_mse};
  if (!per_tensor || search.stopped) return search;
  // Each trial: the plan of one method choice over the same statistics, simulated on the holdout.
  PlanScorer score = [&](const MethodChoice& choice) -> Result<PlanScore> {
    QK_ASSIGN_OR_RETURN(BuiltPlan built,
                        BuildPlan(prepared.statistics, prepared.model, prepared.sites, choice));
    QK_ASSIGN_OR_RETURN(analysis::TrialResult t, evaluator.EvaluatePlan(built.plan, {metric}));
    return PlanScore{metric->Loss(t.metrics.at(metric->name()), fp32_value),
                     t.output.relative_mse()};
  };
  QK_ASSIGN_OR_RETURN(search.per_tensor,
                      ChoosePerTensor(prepared.sites, methods, plans, search.choice, search.score,
                                      score, kAutoMaxTensorTrials, out_of_time));
  search.stopped = search.per_tensor.stopped;
  search.choice = search.per_tensor.methods;
  search.score = search.per_tensor.score;
  return search;
}

std::string FormatCompareMethods(const CompareMethodsResult& r) {
  std::string s =
      fmt::format("held out: {} ; metric {} (FP32 {:.4f})\n", r.holdout, r.metric, r.fp32_value);
  s += fmt::format("{:<18} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "method", r.metric, "loss",
                   "agreement", "SQNR dB", "rel MSE");
  for (const MethodScore& m : r.scores) {
    s += fmt::format("{:<18} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.2f} {:>12.4e}{}\n", m.method,
                     m.value, m.loss, m.agreement, m.sqnr_db, m.rel_mse,
                     m.method == r.best ? "  <- best" : "");
  }
  if (r.tensor_trials > 0 || r.tensor_candidates > 0) {
    s += fmt::format(
        "per tensor: {} of {} candidate tensors changed in {} trials (loss {:.4g}, rel MSE {:.4e})\n",
        r.tensor_changes.size(), r.tensor_candidates, r.tensor_trials, r.tensor_loss,
        r.tensor_rel_mse);
    for (const TensorMethodChange& c : r.tensor_changes) {
      s += fmt::format("  {}: {} -> {} (loss {:.4g} -> {:.4g}, rel MSE {:.4e} -> {:.4e})\n",
                       c.tensor, c.from, c.to, c.before.loss, c.after.loss, c.before.rel_mse,
                       c.after.rel_mse);
    }
  }
  if (!r.ptq_trials.empty()) {
    s += "PTQ stages on the chosen plan (held-out loss, rel MSE, seconds):\n";
    for (const PtqTrial& t : r.ptq_trials) {
      s += fmt::format("  {:<24} {:>10.4g} {:>12.4e} {:>8.1f}{}\n",
                       t.stages.empty() ? "(none)" : t.stages, t.loss, t.rel_mse, t.seconds,
                       t.stages == r.ptq_best ? "  <- kept" : "");
    }
  }
  s += fmt::format(
      "best: {} ({:.2f} s for {} methods{}, one statistics pass)\n", r.best, r.seconds,
      r.scores.size(),
      r.tensor_trials > 0 ? fmt::format(" and {} per-tensor trials", r.tensor_trials) : "");
  return s;
}

std::string CompareMethodsJson(const CompareMethodsResult& r) {
  nlohmann::json scores = nlohmann::json::array();
  for (const MethodScore& m : r.scores) {
    scores.push_back({{"method", m.method},
                      {"value", m.value},
                      {"loss", m.loss},
                      {"agreement", m.agreement},
                      {"sqnr_db", std::isfinite(m.sqnr_db) ? nlohmann::json(m.sqnr_db)
                                                           : nlohmann::json(nullptr)},
                      {"rel_mse", m.rel_mse}});
  }
  nlohmann::json j{{"holdout", r.holdout},
                   {"metric", r.metric},
                   {"fp32", r.fp32_value},
                   {"methods", scores},
                   {"best", r.best},
                   {"seconds", r.seconds},
                   {"written", r.best_result.written}};
  nlohmann::json changes = nlohmann::json::array();
  for (const TensorMethodChange& c : r.tensor_changes) {
    changes.push_back({{"tensor", c.tensor},
                       {"from", c.from},
                       {"to", c.to},
                       {"loss_before", c.before.loss},
                       {"loss_after", c.after.loss}});
  }
  const CheckResult& check = r.best_result.check;
  if (check.ran) {
    auto number = [](double v) {
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    j["check"] = {{"data", check.data},         {"origin", check.origin},
                  {"samples", check.samples},   {"agreement", number(check.agreement)},
                  {"top1", number(check.top1)}, {"fp32_top1", number(check.fp32_top1)},
                  {"rel_mse", check.rel_mse},   {"seconds", check.seconds},
                  {"warning", check.warning}};
  }
  j["per_tensor"] = {
      {"changes", changes}, {"trials", r.tensor_trials}, {"candidates", r.tensor_candidates}};
  if (!r.ptq_trials.empty()) {
    nlohmann::json trials = nlohmann::json::array();
    for (const PtqTrial& t : r.ptq_trials) {
      trials.push_back(
          {{"stages", t.stages}, {"loss", t.loss}, {"rel_mse", t.rel_mse}, {"seconds", t.seconds}});
    }
    j["ptq"] = {{"trials", trials}, {"kept", r.ptq_best}};
  }
  return j.dump(1);
}

}  // namespace quantkit::pipelines
