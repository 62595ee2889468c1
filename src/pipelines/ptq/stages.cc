#include "pipelines/ptq/stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/check.h"
#include "common/progress.h"
#include "common/text.h"
#include "data/source.h"
#include "ir/clone.h"
#include "pipelines/ptq/stage_internal.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string FormatValue(const PtqParam& p, double v) {
  if (v < p.min)
    return "auto";  // a default below the range: chosen by the stage (smoothquant's alpha)
  return p.integer ? fmt::format("{}", static_cast<int64_t>(v)) : fmt::format("{:g}", v);
}

// Fewer samples than asked when their cached activations would not fit: the FP32 model's peak of
// live values per sample, held three times (FP32 run, simulated run, the layer's own inputs and
// targets).
constexpr int64_t kCacheCopies = 3;

}  // namespace

const std::vector<PtqStageInfo>& PtqStages() {
  static const std::vector<PtqStageInfo> stages{
      {PtqStageKind::kSmoothQuant,
       "smoothquant",
       "per input channel, a scale moved from each activation into the weights reading it (X/s, diag(s) W)",
       {{"alpha", -1, 0, 1, false,
         "migration strength s = max|X|^alpha / max|W|^(1-alpha); default: chosen on held-out data"}}},
      {PtqStageKind::kSeqMse,
       "seqmse",
       "per output channel, the weight clip (k/K of max|w|) minimising the layer's output error",
       {{"candidates", 20, 1, 1000, true, "K: clip candidates max|w| * k/K, k = 1..K"}}},
      {PtqStageKind::kAdaRound,
       "adaround",
       "learned up/down rounding of each weight, reconstructing each layer block's FP32 output",
       {{"iterations", 2000, 1, 1e7, true, "Adam steps per layer"},
        {"reg", 0.01, 0, 1e3, false, "weight of the rounding regulariser"},
        {"beta_start", 20, 1, 1e3, false,
         "the regulariser's exponent at the end of the warm start"},
        {"beta_end", 2, 1, 1e3, false, "the exponent at the last iteration (cosine decay)"},
        {"warm_start", 0.2, 0, 1, false, "share of the iterations without the regulariser"},
        {"lr", 1e-3, 1e-8, 1, false, "Adam's learning rate"}}},
      {PtqStageKind::kBiasCorrection,
       "bias-correction",
       "the mean shift of each quantized layer's output, per channel, folded into its bias",
       {}},
  };
  return stages;
}

const PtqStageInfo& PtqStageInfoFor(PtqStageKind kind) {
  for (const PtqStageInfo& s : PtqStages()) {
    if (s.kind == kind) return s;
  }
  QK_CHECK(false, "unknown PTQ stage kind {}", static_cast<int>(kind));
  return PtqStages().front();
}

double PtqStageSpec::Get(const std::string& name) const {
  auto it = params.find(name);
  QK_CHECK(it != params.end(), "PTQ stage {} has no parameter '{}'", PtqStageInfoFor(kind).name,
           name);
  return it->second;
}

std::string PtqStageSpec::Label() const {
  const PtqStageInfo& info = PtqStageInfoFor(kind);
  if (info.params.empty()) return info.name;
  std::string s = std::string(info.name) + "(";
  for (size_t i = 0; i < info.params.size(); ++i) {
    s += fmt::format("{}{}={}", i ? "," : "", info.params[i].name,
                     FormatValue(info.params[i], Get(info.params[i].name)));
  }
  return s + ")";
}

Result<std::vector<PtqStageSpec>> ParsePtqStages(const std::string& text) {
  std::vector<PtqStageSpec> stages;
  if (text.empty()) return stages;
  std::set<PtqStageKind> seen;
  std::vector<std::string> names;
  for (const PtqStageInfo& s : PtqStages()) names.push_back(s.name);
  for (const std::string& item : Split(text, ',')) {
    const std::vector<std::string> parts = Split(item, ':');
    const PtqStageInfo* info = nullptr;
    for (const PtqStageInfo& s : PtqStages()) {
      if (parts[0] == s.name) info = &s;
    }
    QK_RETURN_IF_NOT(info != nullptr, StatusCode::kInvalidArgument, "--ptq: unknown stage '{}'{}",
                     EscapeControl(parts[0]), DidYouMean(parts[0], names, "stages"));
    QK_RETURN_IF_NOT(seen.insert(info->kind).second, StatusCode::kInvalidArgument,
                     "--ptq: stage '{}' given twice", info->name);
    PtqStageSpec spec;
    spec.kind = info->kind;
    for (const PtqParam& p : info->params) spec.params[p.name] = p.default_value;
    std::set<std::string> given;
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      const std::string key = parts[i].substr(0, eq);
      std::vector<std::string> keys;
      const PtqParam* param = nullptr;
      for (const PtqParam& p : info->params) {
        keys.push_back(p.name);
        if (key == p.name) param = &p;
      }
      QK_RETURN_IF_NOT(eq != std::string::npos && param != nullptr, StatusCode::kInvalidArgument,
                       "--ptq: '{}' is not KEY=VALUE with a parameter of {}{}",
                       EscapeControl(parts[i]), info->name, DidYouMean(key, keys, "parameters"));
      const std::string value = parts[i].substr(eq + 1);
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      QK_RETURN_IF_NOT(!value.empty() && end == value.c_str() + value.size() && std::isfinite(v),
                       StatusCode::kInvalidArgument, "--ptq: {}:{}='{}' is not a number",
                       info->name, key, EscapeControl(value));
      QK_RETURN_IF_NOT(!param->integer || v == std::floor(v), StatusCode::kInvalidArgument,
                       "--ptq: {}:{}={} is not an integer: want an integer in [{}, {}]", info->name,
                       key, EscapeControl(value), FormatValue(*param, param->min),
                       FormatValue(*param, param->max));
      QK_RETURN_IF_NOT(v >= param->min && v <= param->max, StatusCode::kInvalidArgument,
                       "--ptq: {}:{}={} is out of range: want {} in [{}, {}]", info->name, key,
                       EscapeControl(value), param->integer ? "an integer" : "a number",
                       FormatValue(*param, param->min), FormatValue(*param, param->max));
      QK_RETURN_IF_NOT(given.insert(key).second, StatusCode::kInvalidArgument,
                       "--ptq: {}:{} given twice (each parameter once)", info->name, key);
      spec.params[key] = v;
    }
    stages.push_back(std::move(spec));
  }
  // SmoothQuant changes the weights and recalibrates the plan: what ran before it would be lost.
  for (size_t i = 1; i < stages.size(); ++i) {
    QK_RETURN_IF_NOT(
        stages[i].kind != PtqStageKind::kSmoothQuant, StatusCode::kInvalidArgument,
        "--ptq: smoothquant must come first (it changes the weights and calibrates the plan again): "
        "give it before {}",
        PtqStageInfoFor(stages[0].kind).name);
  }
  // AdaRound learns the rounding on a fixed grid: a later range search would discard it.
  for (size_t i = 0; i < stages.size(); ++i) {
    for (size_t j = i + 1; j < stages.size(); ++j) {
      QK_RETURN_IF_NOT(
          !(stages[i].kind == PtqStageKind::kAdaRound && stages[j].kind == PtqStageKind::kSeqMse),
          StatusCode::kInvalidArgument,
          "--ptq: seqmse must come before adaround (adaround learns the rounding on the grid seqmse "
          "chooses): give seqmse,adaround");
    }
  }
  // Bias correction measures the shift the final weights leave: nothing may change them after it.
  for (size_t i = 0; i + 1 < stages.size(); ++i) {
    QK_RETURN_IF_NOT(
        stages[i].kind != PtqStageKind::kBiasCorrection, StatusCode::kInvalidArgument,
        "--ptq: bias-correction must come last (it corrects the shift the final weights leave): give "
        "it after {}",
        PtqStageInfoFor(stages[i + 1].kind).name);
  }
  for (const PtqStageSpec& s : stages) {
    if (s.kind != PtqStageKind::kAdaRound) continue;
    QK_RETURN_IF_NOT(s.Get("beta_end") <= s.Get("beta_start"), StatusCode::kInvalidArgument,
                     "--ptq: adaround's beta_end ({:g}) must not exceed beta_start ({:g})",
                     s.Get("beta_end"), s.Get("beta_start"));
  }
  return stages;
}

std::string PtqStagesText(const std::vector<PtqStageSpec>& stages) {
  std::string s;
  for (const PtqStageSpec& spec : stages)
    s += (s.empty() ? "" : ",") + std::string(PtqStageInfoFor(spec.kind).name);
  return s;
}

Status CheckPtqOptions(const PtqOptions& o) {
  QK_RETURN_IF_NOT(o.samples > 0, StatusCode::kInvalidArgument,
                   "--ptq-samples must be positive, got {}", o.samples);
  QK_RETURN_IF_NOT(o.batch > 0, StatusCode::kInvalidArgument,
                   "--ptq-batch must be positive, got {}", o.batch);
  QK_RETURN_IF_NOT(o.memory_bytes >= (int64_t{1} << 20), StatusCode::kInvalidArgument,
                   "--ptq-memory must be at least 1 MiB, got {} bytes", o.memory_bytes);
  return Status::Ok();
}

namespace ptq {

Result<std::vector<ir::Tensor>> RunBlock(const ir::Model& block,
                                         const std::vector<ir::Tensor>& inputs) {
  QK_ASSIGN_OR_RETURN(ir::Model copy, ir::CloneModel(block));
  runtime::InterpreterOptions options;
  options.check_finite_inputs = false;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp,
                      runtime::Interpreter::Create(std::move(copy), options));
  std::vector<ir::Tensor> outs;
  for (const ir::Tensor& x : inputs) {
    QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> o,
                        interp->Run({{interp->input_names().at(0), x}}));
    outs.push_back(std::move(o.at(0).tensor));
  }
  return outs;
}

Status ForEachLayer(
    Context& ctx, const std::string& label, int64_t units_per_layer, const char* unit,
    const std::function<Status(LayerStep&, const std::function<void(int64_t)>&)>& fn,
    PtqStageReport* report, int64_t* peak_bytes) {
  std::vector<analysis::SkippedLayer> skipped;
  QK_ASSIGN_OR_RETURN(
      std::vector<analysis::PtqLayer> layers,
      analysis::FindPtqLayers(*ctx.model.model, *ctx.plan, ctx.sites.sites, &skipped));
  for (const analysis::SkippedLayer& s : skipped)
    report->lines.push_back(fmt::format("{}: skipped, {}", s.node, s.reason));
  if (layers.empty() && !skipped.empty()) {
    report->notes.push_back(fmt::format("no layer to fit: {} skipped ({}{}: {})", skipped.size(),
                                        skipped.size() > 1 ? "e.g. " : "", skipped.front().node,
                                        skipped.front().reason));
  }
  analysis::SimulationOptions simulation;
  simulation.placement = ctx.sites.placement;
  simulation.mode = passes::PlacementPolicy::kTensorRT;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::LayerInputCache> cache,
                      analysis::LayerInputCache::Create(ctx.model.model, ctx.batches, simulation));
  Progress progress(label, static_cast<int64_t>(layers.size()) * units_per_layer, unit);
  if (!ctx.options.progress) progress.set_enabled(false);
  for (const analysis::PtqLayer& layer : layers) {
    progress.set_note(layer.node.empty() ? layer.output : layer.node);
    QK_ASSIGN_OR_RETURN(analysis::LayerInputCache::LayerInputs inputs,
                        cache->Advance(layer, *ctx.plan));
    QK_ASSIGN_OR_RETURN(ir::Model block, analysis::ExtractLayerBlock(*ctx.model.model, layer));
    const quant::TensorQuant* weight = ctx.plan->Find(layer.weight);
    QK_RETURN_IF_NOT(weight && weight->quantized, StatusCode::kInternal,
                     "{}: '{}' lost its weight entry", label, layer.weight);
    LayerStep step{layer, std::move(inputs), std::make_shared<const ir::Model>(std::move(block)),
                   *weight};
    QK_RETURN_IF_ERROR(
        fn(step, [&](int64_t) {
          progress.Advance(1);
        }).WithContext(fmt::format("{} of node '{}' ({})", label, layer.node, layer.op_type)));
    if (units_per_layer == 1) progress.Advance(1);
    ++report->layers;
  }
  progress.Finish();
  *peak_bytes = std::max(*peak_bytes, cache->peak_bytes());
  return Status::Ok();
}

}  // namespace ptq

namespace {

// The first `n` samples of the calibration data, in run batches of options.batch samples, cut
// down so that the cache fits options.memory_bytes.
Result<std::vector<data::Batch>> ReadStageSamples(const LoadedModel& model, const PtqData& spec,
                                                  const PtqOptions& options, PtqReport* report) {
  QK_RETURN_IF_NOT(!spec.spec.empty(), StatusCode::kInvalidArgument,
                   "--ptq needs the calibration data itself (--data), not only statistics");
  const std::vector<data::InputSpec> inputs = data::ModelInputs(*model.model);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(spec.spec, inputs, spec.image));
  if (spec.limit > 0) source = data::Take(std::move(source), spec.limit);
  int64_t n = std::min(options.samples, source->num_samples());
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: no samples for the PTQ stages",
                   source->Describe());
  const int64_t batch = data::EffectiveBatchSize(*source, std::min(options.batch, n));
  // The FP32 model's peak of live activations on the first batch sizes the cache.
  QK_ASSIGN_OR_RETURN(std::vector<data::Batch> first,
                      data::ReadStackable(*source, 0, std::min(batch, n)));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp,
                      runtime::Interpreter::Create(model.model));
  runtime::RunStats stats;
  std::vector<runtime::NamedTensor> feeds;
  for (auto& [name, t] : first.at(0).inputs) feeds.push_back({name, t});
  runtime::RunOptions run;
  run.stats = &stats;
  QK_RETURN_IF_ERROR(interp->Run(feeds, run).status());
  const double per_sample = static_cast<double>(stats.peak_live_bytes) /
                            static_cast<double>(std::max<int64_t>(first[0].size, 1));
  const int64_t fit = static_cast<int64_t>(static_cast<double>(options.memory_bytes) /
                                           (kCacheCopies * std::max(per_sample, 1.0)));
  if (fit < n) {
    report->notes.push_back(fmt::format(
        "{} of the {} samples asked for (--ptq-samples) fit the {} of cached activations "
        "(--ptq-memory; {} live per sample)",
        std::max<int64_t>(fit, 1), n, FormatBytes(options.memory_bytes),
        FormatBytes(static_cast<int64_t>(per_sample))));
    n = std::max<int64_t>(fit, 1);
  }
  std::vector<data::Batch> batches;
  for (int64_t s = 0; s < n; s += batch) {
    QK_ASSIGN_OR_RETURN(std::vector<data::Batch> groups,
                        data::ReadStackable(*source, s, std::min(batch, n - s)));
    for (data::Batch& b : groups) batches.push_back(std::move(b));
  }
  report->samples = n;
  report->notes.push_back(fmt::format("PTQ stages fit on the first {} samples of {}, in runs of {}",
                                      n, source->Describe(), batch));
  return batches;
}

}  // namespace

Result<PtqReport> RunPtqStages(const LoadedModel& model, const CalibrationSites& sites,
                               const PtqData& data, const PtqOptions& options,
                               quant::QuantPlan* plan) {
  PtqReport report;
  if (options.stages.empty()) return report;
  QK_RETURN_IF_ERROR(CheckPtqOptions(options));
  const auto start = std::chrono::steady_clock::now();
  QK_ASSIGN_OR_RETURN(std::vector<data::Batch> batches,
                      ReadStageSamples(model, data, options, &report));
  std::optional<ptq::SmoothResult> smoothed;  // the FP32 model of the stages after smoothquant
  for (const PtqStageSpec& spec : options.stages) {
    ptq::Context ctx{smoothed ? smoothed->model : model, smoothed ? smoothed->sites : sites,
                     batches, options, plan};
    const auto stage_start = std::chrono::steady_clock::now();
    PtqStageReport r;
    r.stage = spec.Label();
    switch (spec.kind) {
      case PtqStageKind::kSmoothQuant:
        QK_RETURN_IF_ERROR(ptq::RunSmoothQuant(spec, ctx, data, &r, &smoothed));
        break;
      case PtqStageKind::kSeqMse:
        QK_RETURN_IF_ERROR(ptq::RunSeqMse(spec, ctx, &r, &report.cache_peak_bytes));
        break;
      case PtqStageKind::kAdaRound:
        QK_RETURN_IF_ERROR(ptq::RunAdaRound(spec, ctx, &r, &report.cache_peak_bytes));
        break;
      case PtqStageKind::kBiasCorrection:
        QK_RETURN_IF_ERROR(ptq::RunBiasCorrection(spec, ctx, &r, &report.cache_peak_bytes));
        break;
    }
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start).count();
    plan->provenance.stages.push_back(fmt::format("{} samples={} batch={} seed={}", r.stage,
                                                  report.samples, options.batch, options.seed));
    report.stages.push_back(std::move(r));
  }
  QK_RETURN_IF_ERROR(quant::ValidatePlan(*plan));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::vector<std::string> FormatPtqReport(const PtqReport& report) {
  std::vector<std::string> lines;
  for (const PtqStageReport& s : report.stages) {
    const double ratio = s.loss_before > 0 ? s.loss_after / s.loss_before : 1.0;
    if (!s.summary.empty()) {
      lines.push_back(fmt::format("{} in {:.1f} s", s.summary, s.seconds));
    } else {
      lines.push_back(fmt::format(
          "ptq {}: {} layers, {} left as they were; layer output error {:.4g} -> {:.4g} "
          "(x{:.3f}) in {:.1f} s",
          s.stage, s.layers, s.unchanged, s.loss_before, s.loss_after, ratio, s.seconds));
    }
    for (const std::string& n : s.notes) lines.push_back("ptq   " + n);
  }
  for (const std::string& n : report.notes) lines.push_back("ptq: " + n);
  if (!report.stages.empty()) {
    // smoothquant alone caches no layer inputs.
    lines.push_back(report.cache_peak_bytes > 0
                        ? fmt::format("ptq: {:.1f} s, cached activations at most {}",
                                      report.seconds, FormatBytes(report.cache_peak_bytes))
                        : fmt::format("ptq: {:.1f} s", report.seconds));
  }
  return lines;
}

}  // namespace quantkit::pipelines
