#include "pipelines/evaluate/fallback.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/quantized_artifacts.h"

namespace quantkit::pipelines {
namespace {

// Rank 0 (or the only process): plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json.
Status WriteOutputs(const ir::Model& model, const FallbackOptions& options, FallbackResult* result);

quant::QuantPlan WithFloatNodes(const quant::QuantPlan& plan, const FloatSet& nodes,
                                const std::string& reason) {
  quant::QuantPlan p = plan;
  for (const std::string& n : nodes) p.float_nodes.emplace(n, reason);
  return p;
}

}  // namespace

Result<std::vector<std::string>> FallbackCandidates(const analysis::PlanEvaluator& evaluator,
                                                    const quant::QuantPlan& plan) {
  QK_ASSIGN_OR_RETURN(ir::Model model,
                      analysis::LoadModelForQuantization(evaluator.options().model));
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites,
                      passes::PlanSites(*model.graph, plan, evaluator.options().simulation));
  quant::QuantPlan full = plan;
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*model.graph, sites, &full));
  std::vector<std::string> nodes;
  for (const passes::QdqSite& s : sites) {
    const quant::TensorQuant* t = full.Find(s.tensor);
    if (!t || !t->quantized || s.consumer->name.empty() || plan.float_nodes.count(s.consumer->name))
      continue;
    if (std::find(nodes.begin(), nodes.end(), s.consumer->name) == nodes.end())
      nodes.push_back(s.consumer->name);
  }
  return nodes;
}

Result<FallbackResult> RunFallback(const analysis::PlanEvaluator& evaluator,
                                   const quant::QuantPlan& input_plan, analysis::Metric* metric,
                                   const FallbackOptions& options) {
  quant::QuantPlan plan = input_plan;
  if (options.floats) {
    // The trials simulate, and the written model keeps, this float part.
    QK_ASSIGN_OR_RETURN(ir::Model float_model,
                        analysis::LoadModelForQuantization(evaluator.options().model));
    const quant::FloatDType before = plan.float_precision.dtype;
    QK_RETURN_IF_ERROR(
        passes::ResolveFloatOptions(*float_model.graph, *options.floats, &plan.float_precision));
    if (plan.float_precision.dtype != before) {
      // Decided for another dtype: the plan's ranges decide.
      plan.float_precision.fp32_tensors.clear();
      passes::MarkPlanRangeFp32Tensors(&plan);
    }
  }
  FallbackResult r;
  r.metric = metric->name();
  QK_ASSIGN_OR_RETURN(analysis::TrialResult fp32, evaluator.EvaluateFp32({metric}));
  r.fp32_value = fp32.metrics.at(r.metric);
  r.full_eval_seconds = evaluator.fp32_seconds();
  QK_ASSIGN_OR_RETURN(std::vector<std::string> candidates, FallbackCandidates(evaluator, plan));

  std::unique_ptr<analysis::PrefixCache> cache;
  if (options.trial_cache_bytes > 0) {
    const auto cache_start = std::chrono::steady_clock::now();
    QK_ASSIGN_OR_RETURN(cache,
                        analysis::PrefixCache::Create(evaluator, plan, options.trial_cache_bytes));
    r.simulated_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - cache_start).count();
    r.cache_checkpoints = cache->checkpoints();
    r.cache_bytes = cache->bytes();
  }
  std::map<FloatSet, double> values;  // metric value per evaluated set, for the report
  Progress progress("fallback", 0, "trials");
  if (!options.progress || evaluator.rank() != 0) progress.set_enabled(false);
  LossFn loss = [&](const FloatSet& set) -> Result<double> {
    QK_ASSIGN_OR_RETURN(analysis::TrialResult t,
                        evaluator.EvaluatePlan(WithFloatNodes(plan, set, "fallback trial"),
                                               {metric}, nullptr, cache.get()));
    const double v = t.metrics.at(r.metric);
    values[set] = v;
    progress.Advance(1);
    return metric->Loss(v, r.fp32_value);
  };
  QK_ASSIGN_OR_RETURN(
      r.search, SearchFallback(candidates, loss,
                               {options.budget, options.max_float_layers, options.out_of_time}));
  progress.Finish();
  r.int8_value = values.at({});
  r.final_value = values.at(r.search.float_layers);
  r.trial_seconds = r.search.evaluations ? r.search.seconds / r.search.evaluations : 0;

  // The final plan: each float node with the accuracy it recovers alone.
  r.plan = plan;
  for (const std::string& n : r.search.float_layers) {
    double gain = 0;
    for (const RankedLayer& l : r.search.ranking) {
      if (l.layer == n) gain = l.gain;
    }
    r.plan.float_nodes[n] = fmt::format(
        "fallback: {} loss {:.4g} -> {:.4g} with this node alone in float "
        "(budget {})",
        r.metric, r.search.baseline_loss, r.search.baseline_loss - gain, options.budget);
  }
  QK_ASSIGN_OR_RETURN(ir::Model model,
                      analysis::LoadModelForQuantization(evaluator.options().model));
  // Before insertion (LayerPrecisions reads the float graph's activations), then the very Q/DQ
  // model the trials simulated; ApplyPlan fills the plan's weight entries.
  r.layer_precisions = LayerPrecisions(*model.graph, r.plan, options.float_precision);
  passes::ApplyPlanOptions writer = evaluator.options().simulation;
  writer.weight_storage = options.weight_storage;
  QK_RETURN_IF_ERROR(passes::RunPass(model, passes::ApplyPlan(&r.plan, writer)).status());
  if (options.output_dir.empty()) return r;
  // Every rank made the same decisions (the trials' values are the same bits everywhere); rank 0
  // writes, the others wait for its outcome.
  if (evaluator.rank() != 0) {
    QK_RETURN_IF_ERROR(evaluator.Agree(Status::Ok(), "writing the results on rank 0"));
    return r;
  }
  const Status written = WriteOutputs(model, options, &r);
  QK_RETURN_IF_ERROR(evaluator.Agree(written, "writing the results on rank 0"));
  return r;
}

namespace {

Status WriteOutputs(const ir::Model& model, const FallbackOptions& options,
                    FallbackResult* result) {
  FallbackResult& r = *result;
  // All four files or none, and never mixed with a concurrent run's (common/artifact_set.h); or
  // staged into the caller's set, which commits them with its own.
  std::unique_ptr<ArtifactSet> owned;
  ArtifactSet* out = options.artifacts;
  if (!out) {
    QK_ASSIGN_OR_RETURN(owned, ArtifactSet::Open(options.output_dir, kFallbackArtifacts));
    out = owned.get();
  }
  // No calib.cache or ranges.txt: fallback changes which layers stay in float, not the ranges, so
  // the cache of the plan it started from still applies (layer_precisions.txt names it).
  QuantizedFiles files;
  files.implicit_int8 = false;
  QK_RETURN_IF_ERROR(StageBuiltModel(model, r.plan, files, out));
  QK_RETURN_IF_ERROR(
      WriteFileAtomic(out->Stage("layer_precisions.txt"), LayerPrecisionsFile(r.layer_precisions)));
  for (const std::string& f : kFallbackArtifacts) r.written.push_back(out->Target(f));
  QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("fallback.json"), FallbackJson(r) + "\n"));
  return owned ? owned->Commit().status() : Status::Ok();
}

}  // namespace

std::string LayerPrecisionsFile(const std::string& layer_precisions) {
  return "# TensorRT <= 10 implicit INT8 (calib.cache, Jetson/DLA): trtexec --int8 --fp16 --calib=calib.cache "
         "--precisionConstraints=obey --layerPrecisions=<the line below>. TensorRT 11: model.qdq.onnx carries them.\n" +
         layer_precisions + "\n";
}

std::string FormatFallback(const FallbackResult& r, bool with_written) {
  const FallbackSearchResult& s = r.search;
  std::string out = fmt::format(
      "metric {}: FP32 {:.4f}, INT8 {:.4f} (loss {:.4g}), with fallback {:.4f} (loss {:.4g})\n",
      r.metric, r.fp32_value, r.int8_value, s.baseline_loss, r.final_value, s.loss);
  out += "ranking (loss with the node alone in float):\n";
  for (size_t i = 0; i < s.ranking.size() && i < 10; ++i) {
    out += fmt::format("  {:>2}. {:<32} loss {:.4g} (gain {:+.4g})\n", i + 1, s.ranking[i].layer,
                       s.ranking[i].loss_alone, s.ranking[i].gain);
  }
  out += "steps:\n";
  for (const SearchStep& st : s.steps) {
    if (st.phase == "rank") continue;
    out += fmt::format("  {:<8} {:<32} -> {} float, loss {:.4g}{} ({:.2f} s)\n", st.phase, st.layer,
                       st.float_layers.size(), st.loss, st.accepted ? " accepted" : "", st.seconds);
  }
  out += fmt::format(
      "{}: {} layer(s) in float:", s.within_budget ? "within budget" : "NOT within budget",
      s.float_layers.size());
  for (const std::string& l : s.float_layers) out += " " + l;
  out +=
      fmt::format("\nTensorRT <= 10 (implicit INT8): --layerPrecisions={}\n", r.layer_precisions);
  out += fmt::format("search: {} trials in {:.2f} s ({:.3f} s per trial; one FP32 pass {:.3f} s)\n",
                     s.evaluations, s.seconds, r.trial_seconds, r.full_eval_seconds);
  if (r.cache_checkpoints > 0) {
    out += fmt::format(
        "trials start from {} checkpoint(s) of cached activations ({:.1f} MiB; one whole simulated "
        "pass {:.3f} s)\n",
        r.cache_checkpoints, static_cast<double>(r.cache_bytes) / (1 << 20), r.simulated_seconds);
  }
  if (with_written) {
    for (const std::string& w : r.written) out += "wrote " + w + "\n";
  }
  return out;
}

std::string FallbackJson(const FallbackResult& r) {
  const FallbackSearchResult& s = r.search;
  nlohmann::json ranking = nlohmann::json::array(), steps = nlohmann::json::array();
  for (const RankedLayer& l : s.ranking)
    ranking.push_back({{"node", l.layer}, {"loss_alone", l.loss_alone}, {"gain", l.gain}});
  for (const SearchStep& st : s.steps) {
    steps.push_back({{"phase", st.phase},
                     {"node", st.layer},
                     {"float_nodes", st.float_layers},
                     {"loss", st.loss},
                     {"accepted", st.accepted},
                     {"seconds", st.seconds}});
  }
  nlohmann::json j{
      {"metric", r.metric},
      {"fp32", r.fp32_value},
      {"int8", r.int8_value},
      {"final", r.final_value},
      {"baseline_loss", s.baseline_loss},
      {"loss", s.loss},
      {"within_budget", s.within_budget},
      {"float_nodes", s.float_layers},
      {"layer_precisions", r.layer_precisions},
      {"ranking", ranking},
      {"steps", steps},
      {"trials", s.evaluations},
      {"search_seconds", s.seconds},
      {"trial_seconds", r.trial_seconds},
      {"fp32_pass_seconds", r.full_eval_seconds},
      {"simulated_pass_seconds", r.simulated_seconds},
      {"trial_cache", {{"checkpoints", r.cache_checkpoints}, {"bytes", r.cache_bytes}}}};
  return j.dump(1);
}

}  // namespace quantkit::pipelines
