// The smoothquant PTQ stage (pipelines/ptq/stages.h; the graph side is passes/smoothquant.h):
//
//   1. the groups (an activation X, the layers reading it, the producer 1/s folds into);
//   2. max|X_j| per channel on the stage's samples in the FP32 model;
//   3. alpha: the one given, or each of kAlphaGrid (0.3, 0.4, ..., 0.8) and no smoothing at all,
//      each smoothed model calibrated again on the head of the calibration data (the plan's own
//      methods) and scored by its output relative MSE against FP32 on the held-out tail (the last
//      quarter, as --method auto holds out); the best is kept, no smoothing when none beats it,
//      so choosing never makes the held-out score worse than the plan without the stage;
//   4. the plan rebuilt from statistics collected again on the smoothed float model over all the
//      calibration data (activation ranges with the plan's methods, weight scales from the
//      smoothed weights, per channel or per tensor as before), the changed initializers in
//      plan.initializers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>

#include "analysis/layer_cache.h"
#include "analysis/plan_eval.h"
#include "common/check.h"
#include "common/progress.h"
#include "ir/clone.h"
#include "ir/scopes.h"
#include "passes/apply_plan.h"
#include "passes/smoothquant.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/ptq/stage_internal.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines::ptq {
namespace {

constexpr double kAlphaGrid[] = {0.3, 0.4, 0.5, 0.6, 0.7, 0.8};

std::string GridText() {
  std::string s;
  for (double a : kAlphaGrid) s += fmt::format("{}{:g}", s.empty() ? "" : ",", a);
  return s;
}

// "N layers skipped (count x reason; ...)", most frequent first. A reason is counted without the
// node names it quotes ("node 'n' (Op)" as "Op"), and "1/s cannot be folded into node '...' (Op):
// why" by Op alone.
std::string SkippedText(const std::vector<passes::SmoothSkip>& skipped) {
  if (skipped.empty()) return "no layer skipped";
  std::map<std::string, int> counts;
  for (const passes::SmoothSkip& s : skipped) {
    std::string r = s.reason;
    const std::string fold = "1/s cannot be folded into node '";
    if (r.rfind(fold, 0) == 0) {
      const size_t open = r.find("' (", fold.size()),
                   close = r.find(')', open == std::string::npos ? 0 : open);
      if (open != std::string::npos && close != std::string::npos) {
        r = "input from " + r.substr(open + 3, close - open - 3) + ", which cannot take 1/s";
      }
    }
    // "node 'name' (Op)" counts as "Op".
    for (size_t a = r.find("node '"); a != std::string::npos; a = r.find("node '", a)) {
      const size_t open = r.find("' (", a + 6),
                   close = open == std::string::npos ? open : r.find(')', open);
      if (close == std::string::npos) break;
      r.replace(a, close - a + 1, r.substr(open + 3, close - open - 3));
    }
    for (size_t a = r.find('\''); a != std::string::npos; a = r.find('\'', a)) {
      const size_t b = r.find('\'', a + 1);
      if (b == std::string::npos) break;
      r.erase(a, b - a + 1);
    }
    ++counts[r];
  }
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [reason, n] : counts) order.push_back({-n, reason});
  std::sort(order.begin(), order.end());
  std::string text;
  for (const auto& [n, reason] : order)
    text += fmt::format("{}{} x {}", text.empty() ? "" : "; ", -n, reason);
  return fmt::format("{} layers skipped ({})", skipped.size(), text);
}

// The same sites on a clone of their model: node pointers mapped by position (CloneModel keeps
// every graph's node order).
Result<CalibrationSites> RemapSites(const CalibrationSites& sites, const ir::Model& from,
                                    const ir::Model& to) {
  std::vector<const ir::Node*> a, b;
  ir::ForEachScopedGraph(*from.graph, [&](const ir::Graph& g, const std::string&) {
    for (const ir::Node* n : g.nodes()) a.push_back(n);
  });
  ir::ForEachScopedGraph(*to.graph, [&](const ir::Graph& g, const std::string&) {
    for (const ir::Node* n : g.nodes()) b.push_back(n);
  });
  QK_RETURN_IF_NOT(a.size() == b.size(), StatusCode::kInternal,
                   "smoothquant: the clone has {} nodes, not {}", b.size(), a.size());
  std::map<const ir::Node*, ir::Node*> map;
  for (size_t i = 0; i < a.size(); ++i) map[a[i]] = const_cast<ir::Node*>(b[i]);
  CalibrationSites out = sites;
  for (passes::QdqSite& s : out.sites) {
    auto it = map.find(s.consumer);
    QK_RETURN_IF_NOT(it != map.end(), StatusCode::kInternal, "smoothquant: site '{}' has no node",
                     s.tensor);
    s.consumer = it->second;
  }
  return out;
}

// `model` with `edits` written into its initializers, and its sites.
Result<SmoothResult> SmoothedModel(const LoadedModel& model, const CalibrationSites& sites,
                                   const std::map<std::string, ir::Tensor>& edits) {
  QK_ASSIGN_OR_RETURN(ir::Model clone, ir::CloneModel(*model.model));
  quant::QuantPlan overrides;
  for (const auto& [name, t] : edits) overrides.initializers[name] = {t, "smoothquant"};
  QK_RETURN_IF_ERROR(passes::ApplyInitializerOverrides(overrides, &clone));
  SmoothResult s{model, {}};
  s.model.model = std::make_shared<const ir::Model>(std::move(clone));
  QK_ASSIGN_OR_RETURN(s.sites, RemapSites(sites, *model.model, *s.model.model));
  return s;
}

// The plan of `model` calibrated on the first `samples` calibration samples with data.methods.
Result<quant::QuantPlan> Recalibrate(const SmoothResult& m, const PtqData& data, int64_t samples,
                                     int64_t batch) {
  const std::vector<data::InputSpec> inputs = data::ModelInputs(*m.model.model);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(data.spec, inputs, data.image));
  source = data::Take(std::move(source), samples);
  bool max_only = data.methods.method.method == quant::CalibMethod::kMax;
  for (const auto& [key, method] : data.methods.overrides)
    max_only = max_only && method.method == quant::CalibMethod::kMax;
  analysis::PassOptions pass;
  pass.batch_size = batch;
  pass.run_batch = analysis::CalibrationRunBatch(inputs, std::nullopt);
  pass.progress = false;
  QK_ASSIGN_OR_RETURN(
      Statistics stats,
      CollectStatistics(m.model, analysis::ReadRuns(*source, pass, inputs), source->num_samples(),
                        m.sites, pass,
                        max_only ? CollectorKind::kRangeOnly : CollectorKind::kHistogram));
  QK_ASSIGN_OR_RETURN(BuiltPlan built, BuildPlan(stats, m.model, m.sites, data.methods));
  return std::move(built.plan);
}

// max|X_j| of every group's activation over the batches holding the first `samples` samples.
Result<std::vector<std::vector<float>>> ActivationMax(
    const ir::Model& model, const std::vector<passes::SmoothGroup>& groups,
    const std::vector<data::Batch>& batches, int64_t samples) {
  std::vector<std::string> given, wanted;
  for (const auto& [name, t] : batches.at(0).inputs) given.push_back(name);
  for (const passes::SmoothGroup& g : groups) wanted.push_back(g.activation);
  QK_ASSIGN_OR_RETURN(ir::Model sub, analysis::ExtractSubModel(model, given, wanted));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp,
                      runtime::Interpreter::Create(std::move(sub)));
  std::vector<std::vector<float>> maxima(groups.size());
  int64_t seen = 0;
  for (const data::Batch& b : batches) {
    if (seen > 0 && seen + b.size > samples) break;
    seen += b.size;
    // The sub-model keeps only the inputs the activations depend on (a state input feeding only
    // later layers is gone): feed exactly those.
    std::vector<runtime::NamedTensor> feeds;
    for (const std::string& name : interp->input_names()) {
      auto it = std::find_if(b.inputs.begin(), b.inputs.end(),
                             [&](const auto& in) { return in.first == name; });
      QK_RETURN_IF_NOT(it != b.inputs.end(), StatusCode::kInternal,
                       "smoothquant: the sample has no input '{}' that the activations need", name);
      feeds.push_back({name, it->second});
    }
    QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> outs, interp->Run(feeds));
    for (size_t i = 0; i < groups.size(); ++i) {
      const runtime::NamedTensor* o = nullptr;
      for (const runtime::NamedTensor& t : outs) o = t.name == groups[i].activation ? &t : o;
      QK_RETURN_IF_NOT(o && o->tensor.dtype() == ir::DType::kFloat, StatusCode::kInternal,
                       "smoothquant: no float value of '{}'", groups[i].activation);
      const std::vector<float> m = passes::ChannelAbsMax(o->tensor, groups[i].channel_axis);
      if (maxima[i].empty()) maxima[i].assign(m.size(), 0.0f);
      for (size_t j = 0; j < m.size() && j < maxima[i].size(); ++j)
        maxima[i][j] = std::max(maxima[i][j], m[j]);
    }
  }
  return maxima;
}

// Every group smoothed with `alpha`, in order (a layer's weight may also be the next group's fold).
Result<std::map<std::string, ir::Tensor>> SmoothAll(const ir::Model& model,
                                                    const std::vector<passes::SmoothGroup>& groups,
                                                    const std::vector<std::vector<float>>& act_max,
                                                    double alpha, std::vector<std::string>* lines) {
  std::map<std::string, ir::Tensor> edits;
  for (size_t i = 0; i < groups.size(); ++i) {
    QK_ASSIGN_OR_RETURN(std::vector<float> w_max, passes::GroupWeightMax(model, groups[i], edits));
    const std::vector<float> s = passes::SmoothingScales(act_max[i], w_max, alpha);
    QK_RETURN_IF_ERROR(passes::ApplySmoothing(model, groups[i], s, &edits));
    if (lines) {
      const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
      const auto [alo, ahi] = std::minmax_element(act_max[i].begin(), act_max[i].end());
      lines->push_back(fmt::format(
          "{}: {} channels, max|X| {:.3g}..{:.3g}, s {:.3g}..{:.3g}, 1/s folded into {}",
          groups[i].activation, s.size(), *alo, *ahi, *lo, *hi, groups[i].producer));
    }
  }
  return edits;
}

}  // namespace

Status RunSmoothQuant(const PtqStageSpec& spec, Context& ctx, const PtqData& data,
                      PtqStageReport* report, std::optional<SmoothResult>* result) {
  const double given_alpha = spec.Get("alpha");
  std::vector<passes::SmoothSkip> skipped;
  QK_ASSIGN_OR_RETURN(std::vector<passes::SmoothGroup> groups,
                      passes::FindSmoothGroups(*ctx.model.model, *ctx.plan, &skipped));
  for (const passes::SmoothSkip& s : skipped)
    report->lines.push_back(fmt::format("{}: skipped, {}", s.node, s.reason));
  report->layers = static_cast<int>(groups.size());
  if (groups.empty()) {
    report->stage = "smoothquant(none: no layer to smooth)";
    report->summary =
        fmt::format("ptq smoothquant: no activation to smooth; {}", SkippedText(skipped));
    return Status::Ok();
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(data.spec, data::ModelInputs(*ctx.model.model), data.image));
  const int64_t total =
      data.limit > 0 ? std::min(data.limit, source->num_samples()) : source->num_samples();
  const int64_t batch = ctx.options.batch;
  // One unit per calibration of a smoothed model: each trial alpha and no smoothing, then the
  // final.
  const bool choose = given_alpha < 0;
  Progress progress("smoothquant",
                    (choose ? static_cast<int64_t>(std::size(kAlphaGrid)) + 1 : 0) + 1,
                    "calibrations");
  if (!ctx.options.progress) progress.set_enabled(false);
  double alpha = given_alpha;
  if (choose) {
    // The held-out tail: the last quarter of the calibration data, as --method auto holds out.
    QK_RETURN_IF_NOT(
        total >= 2, StatusCode::kInvalidArgument,
        "--ptq smoothquant: choosing alpha holds out part of the calibration data, which has {} "
        "sample(s); give more or smoothquant:alpha=A",
        total);
    const int64_t held = std::max<int64_t>(1, total / kHoldoutShareDivisor);
    const int64_t head = total - held;
    QK_ASSIGN_OR_RETURN(std::vector<std::vector<float>> act_max,
                        ActivationMax(*ctx.model.model, groups, ctx.batches, head));
    analysis::PlanEvalOptions eval;
    eval.model = ctx.model.path;
    eval.data = data.spec;
    eval.first_sample = head;
    eval.samples = held;
    eval.batch_size = batch;
    eval.simulation.placement = ctx.sites.placement;
    eval.simulation.mode = passes::PlacementPolicy::kTensorRT;
    QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::PlanEvaluator> evaluator,
                        analysis::PlanEvaluator::Create(eval));
    double best_error = std::numeric_limits<double>::infinity();
    alpha = -1;  // no smoothing
    for (int k = -1; k < static_cast<int>(std::size(kAlphaGrid)); ++k) {
      const double a = k < 0 ? -1.0 : kAlphaGrid[k];
      progress.set_note(a < 0 ? std::string("alpha none") : fmt::format("alpha {:g}", a));
      std::map<std::string, ir::Tensor> edits;
      if (a >= 0) {
        QK_ASSIGN_OR_RETURN(edits, SmoothAll(*ctx.model.model, groups, act_max, a, nullptr));
      }
      QK_ASSIGN_OR_RETURN(SmoothResult m, SmoothedModel(ctx.model, ctx.sites, edits));
      QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, Recalibrate(m, data, head, batch));
      for (auto& [name, t] : edits) plan.initializers[name] = {t, "smoothquant"};
      QK_ASSIGN_OR_RETURN(analysis::TrialResult trial, evaluator->EvaluatePlan(plan, {}));
      const double error = trial.output.relative_mse();
      report->notes.push_back(fmt::format(
          "alpha {}: held-out output rel MSE {:.4e} (samples {}-{}; ranges from the "
          "{} before)",
          a < 0 ? std::string("none") : fmt::format("{:g}", a), error, head, total - 1, head));
      progress.Advance(1);
      if (k < 0) report->loss_before = error;
      if (error < best_error) {
        best_error = error;
        alpha = a;
      }
    }
    report->loss_after = best_error;
    if (alpha < 0) {
      progress.Finish();
      report->stage = "smoothquant(alpha=none)";
      report->unchanged = report->layers;
      report->summary = fmt::format(
          "ptq smoothquant: alpha none (no smoothing: no alpha of {} beat the unsmoothed "
          "plan on the held-out samples, rel MSE {:.4e}); {} groups found, {}",
          GridText(), best_error, groups.size(), SkippedText(skipped));
      return Status::Ok();
    }
  }
  progress.set_note(fmt::format("alpha {:g}, all {} samples", alpha, total));
  // The final smoothing: channel maxima on all the stage's samples, ranges on all the calibration
  // data.
  QK_ASSIGN_OR_RETURN(
      std::vector<std::vector<float>> act_max,
      ActivationMax(*ctx.model.model, groups, ctx.batches, std::numeric_limits<int64_t>::max()));
  using Edits = std::map<std::string, ir::Tensor>;
  QK_ASSIGN_OR_RETURN(Edits edits,
                      SmoothAll(*ctx.model.model, groups, act_max, alpha, &report->lines));
  QK_ASSIGN_OR_RETURN(SmoothResult m, SmoothedModel(ctx.model, ctx.sites, edits));
  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, Recalibrate(m, data, total, batch));
  plan.provenance = ctx.plan->provenance;
  for (auto& [name, t] : edits) plan.initializers[name] = {t, "smoothquant"};
  *ctx.plan = std::move(plan);
  progress.Advance(1);
  progress.Finish();
  size_t layers = 0;
  for (const passes::SmoothGroup& g : groups) layers += g.layers.size();
  report->stage = fmt::format("smoothquant(alpha={:g}{})", alpha, choose ? ",chosen" : "");
  report->summary = fmt::format(
      "ptq smoothquant: alpha {:g} ({}); {} activations smoothed ({} layers), {}; held-out output rel MSE {}; "
      "ranges and weight scales calibrated again on the smoothed model ({} samples)",
      alpha, choose ? fmt::format("chosen of {} and none", GridText()) : std::string("given"),
      groups.size(), layers, SkippedText(skipped),
      choose ? fmt::format("{:.4e} -> {:.4e}", report->loss_before, report->loss_after)
             : std::string("not measured"),
      total);
  result->emplace(std::move(m));
  return Status::Ok();
}

}  // namespace quantkit::pipelines::ptq
