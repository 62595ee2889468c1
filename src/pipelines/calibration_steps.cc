#include "pipelines/calibration_steps.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/sha256.h"
#include "common/text.h"
#include "formats/ranges.h"
#include "ir/clone.h"
#include "ir/scopes.h"
#include "ir/shape_inference.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "pipelines/quantized_artifacts.h"
#include "quant/collectors/histogram.h"
#include "quant/method_amax.h"
#include "quantkit/version.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {

Result<LoadedModel> LoadFloatModel(const std::string& path) {
  LoadedModel loaded;
  loaded.path = path;
  QK_ASSIGN_OR_RETURN(loaded.sha256, Sha256OfFile(path));
  QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(path, &loaded.upgrade,
                                                                          &loaded.load_passes));
  int64_t qdq_nodes = 0;
  for (const ir::Node* n : model.graph->nodes()) {
    qdq_nodes += n->op_type() == "QuantizeLinear" || n->op_type() == "DequantizeLinear";
  }
  QK_RETURN_IF_NOT(
      qdq_nodes == 0, StatusCode::kUnsupported,
      "{}: the model already has {} QuantizeLinear/DequantizeLinear nodes (a QAT or "
      "quantized export); use `quantkit convert` to extract its plan and artifacts, or "
      "calibrate the float model",
      path, qdq_nodes);
  loaded.model = std::make_shared<const ir::Model>(std::move(model));
  return loaded;
}

Result<CalibrationSites> FindCalibrationSites(const LoadedModel& model,
                                              const passes::PlacementOptions& placement,
                                              const passes::FloatOptions& floats) {
  CalibrationSites s;
  s.placement = placement;
  QK_ASSIGN_OR_RETURN(s.sites, passes::FindQdqSites(*model.model->graph, placement));
  s.activations = passes::ActivationTensors(s.sites);
  for (const passes::QdqSite& site : s.sites)
    s.consumer_op.emplace(site.tensor, site.consumer->op_type());
  const ir::Graph& graph = *model.model->graph;
  QK_RETURN_IF_ERROR(passes::ResolveFloatOptions(graph, floats, &s.float_precision));
  if (floats.dtype != quant::FloatDType::kFloat32) {
    // Every float activation of the main graph (bodies stay FP32) not already watched.
    QK_ASSIGN_OR_RETURN(std::vector<std::string> floats_seen, FloatActivations(*model.model));
    for (const std::string& name : floats_seen) {
      if (!std::binary_search(s.activations.begin(), s.activations.end(), name))
        s.float_tensors.push_back(name);
    }
  }
  return s;
}

Result<std::vector<std::string>> FloatActivations(const ir::Model& model) {
  QK_ASSIGN_OR_RETURN(ir::Model typed, ir::CloneModel(model));
  QK_RETURN_IF_ERROR(ir::InferShapes(typed));
  std::vector<std::string> names;
  for (const ir::Value* v : typed.graph->values()) {
    if (v->is_constant() || !v->type.is_tensor() || v->type.dtype != ir::DType::kFloat) continue;
    if (v->producer() || v->is_graph_input()) names.push_back(v->name());
  }
  std::sort(names.begin(), names.end());
  return names;
}

int64_t MarkFp32Tensors(const Statistics& statistics, quant::FloatPrecision* precision) {
  int64_t measured = 0;
  for (const auto& [name, collector] : statistics.stats.tensors) {
    if (collector.range().count == 0) continue;
    ++measured;
    const std::string why = passes::FloatRangeProblem(collector.range().amax, precision->dtype);
    if (!why.empty()) precision->fp32_tensors[name] = why;
  }
  return measured;
}

Result<Statistics> CollectFloatRanges(const LoadedModel& model, const std::string& data,
                                      const data::ImageOptions& image, int64_t samples,
                                      int64_t batch_size, bool progress) {
  QK_RETURN_IF_NOT(batch_size > 0 && samples >= 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive and --samples >= 0, got {} and {}", batch_size,
                   samples);
  const std::vector<data::InputSpec> inputs = data::ModelInputs(*model.model);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, data::OpenSource(data, inputs, image));
  source = data::Take(std::move(source), samples);
  QK_RETURN_IF_NOT(source->num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source->Describe());
  CalibrationSites sites;
  QK_ASSIGN_OR_RETURN(sites.float_tensors, FloatActivations(*model.model));
  analysis::PassOptions pass;
  pass.batch_size = batch_size;
  pass.run_batch = analysis::CalibrationRunBatch(inputs, std::nullopt);
  pass.progress = progress;
  QK_ASSIGN_OR_RETURN(
      Statistics stats,
      CollectStatistics(model, analysis::ReadRuns(*source, pass, inputs), source->num_samples(),
                        sites, pass, CollectorKind::kRangeOnly));
  stats.data_description = source->Describe();
  stats.samples = source->num_samples();
  return stats;
}

Result<Statistics> CollectStatistics(const LoadedModel& model, const analysis::BatchReader& next,
                                     int64_t size_hint, const CalibrationSites& sites,
                                     const analysis::PassOptions& options, CollectorKind kind) {
  Statistics result;
  result.stats.model_sha256 = model.sha256;
  for (const std::string& name : sites.activations) {
    result.stats.tensors.emplace(name, kind == CollectorKind::kRangeOnly
                                           ? quant::TensorCollector::RangeOnly()
                                           : quant::TensorCollector());
  }
  // The float dtype's check needs ranges only; they get histograms when the activations do (a
  // .qkstats file holds histograms only).
  for (const std::string& name : sites.float_tensors) {
    result.stats.tensors.emplace(name, kind == CollectorKind::kRangeOnly
                                           ? quant::TensorCollector::RangeOnly()
                                           : quant::TensorCollector());
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interpreter,
                      runtime::Interpreter::Create(model.model));
  analysis::CollectingObserver observer(&result.stats.tensors);
  QK_ASSIGN_OR_RETURN(result.samples,
                      analysis::RunBatches(*interpreter, next, size_hint, options, {&observer}));
  return result;
}

Result<Statistics> StatisticsFromFiles(const LoadedModel& model,
                                       const std::vector<std::string>& paths) {
  Statistics result;
  QK_ASSIGN_OR_RETURN(result.stats, formats::MergeStatsFiles(paths, model.sha256));
  result.data_description = fmt::format("statistics from {} file(s)", paths.size());
  for (const std::string& f : paths) result.data_description += " " + f;
  result.data_fingerprint = "qkstats";
  return result;
}

const quant::MethodRequest& MethodFor(const std::string& tensor, const CalibrationSites& sites,
                                      const MethodChoice& methods) {
  if (auto it = methods.overrides.find(tensor); it != methods.overrides.end()) return it->second;
  if (auto op = sites.consumer_op.find(tensor); op != sites.consumer_op.end()) {
    if (auto it = methods.overrides.find(op->second); it != methods.overrides.end())
      return it->second;
  }
  return methods.method;
}

Status CheckOverrides(const CalibrationSites& sites, const MethodChoice& methods) {
  for (const auto& [key, method] : methods.overrides) {
    bool known = std::binary_search(sites.activations.begin(), sites.activations.end(), key);
    for (const auto& [tensor, op] : sites.consumer_op) known = known || op == key;
    if (known) continue;
    std::vector<std::string> candidates = sites.activations;
    for (const auto& [tensor, op] : sites.consumer_op) candidates.push_back(op);
    return MakeStatus(
        StatusCode::kNotFound,
        "method override '{}' names no quantized activation tensor and no consumer op type{}",
        EscapeControl(key),
        DidYouMean(key, candidates, "quantized activations and consumer op types"));
  }
  return Status::Ok();
}

Result<ActivationEntry> BuildActivationEntry(const std::string& tensor,
                                             const quant::TensorCollector& collector,
                                             const quant::MethodRequest& method) {
  ActivationEntry out;
  if (collector.range().count == 0) {
    // Only a body tensor can go unseen: the branch of an If on data that no sample took, or a
    // Loop that never iterated. Nothing measured, nothing to quantize with.
    out.entry.tensor = tensor;
    out.entry.role = quant::TensorRole::kActivation;
    out.entry.source = quant::MethodLabel(method);
    out.entry.quantized = false;
    out.entry.reason = kNeverComputedReason;
    // No warning per tensor: ReportBodies sums them up per op type, and the summary's
    // "float:" lines name each one with this reason.
    return out;
  }
  QK_ASSIGN_OR_RETURN(quant::CalibResult amax, quant::AmaxFromCollector(collector, method));
  // QuantPlan::SetActivationAmax is the one amax -> entry rule (a range without a usable scale
  // stays in float); a scratch plan lends it.
  quant::QuantPlan scratch;
  out.entry = std::move(scratch.SetActivationAmax(tensor, amax.amax, quant::MethodLabel(method)));
  quant::TensorQuant& t = out.entry;
  if (method.method != quant::CalibMethod::kMax && amax.amax > 0) {
    out.clipped_share = quant::ShareAbove(collector.histogram(), amax.amax);
  }
  const quant::RangeStats& range = collector.range();
  const int64_t nonfinite = range.nan_count + range.posinf_count + range.neginf_count;
  if (nonfinite > 0) {
    const std::string w = fmt::format(
        "tensor '{}': {} NaN and {} Inf of {} values were left out "
        "of its statistics",
        tensor, range.nan_count, range.posinf_count + range.neginf_count, range.count);
    out.warnings.push_back(w);
    t.reason = t.reason.empty() ? w : t.reason + "; " + w;
  }
  if (!t.quantized) {
    out.warnings.push_back(
        fmt::format("tensor '{}' never varies (amax {}): kept in float, no "
                    "zero scale written",
                    tensor, range.amax));
  }
  return out;
}

Result<BuiltPlan> BuildPlan(const Statistics& statistics, const LoadedModel& model,
                            const CalibrationSites& sites, const MethodChoice& methods) {
  QK_RETURN_IF_ERROR(CheckOverrides(sites, methods));
  BuiltPlan built;
  quant::QuantPlan& plan = built.plan;
  plan.provenance = {model.sha256,
                     statistics.data_description,
                     statistics.data_fingerprint,
                     quant::MethodLabel(methods.method),
                     QUANTKIT_VERSION,
                     statistics.samples,
                     {},
                     {}};
  struct Clipping {
    double share;
    std::string tensor, method;
  };
  std::vector<Clipping> clipping;
  for (const std::string& name : sites.activations) {
    auto it = statistics.stats.tensors.find(name);
    if (it == statistics.stats.tensors.end()) {
      built.warnings.push_back(
          fmt::format("tensor '{}' has no statistics (not produced by the "
                      "run, or missing from the .qkstats files)",
                      name));
      continue;
    }
    const quant::MethodRequest& method = MethodFor(name, sites, methods);
    QK_ASSIGN_OR_RETURN(ActivationEntry a, BuildActivationEntry(name, it->second, method));
    plan.tensors[name] = std::move(a.entry);
    built.warnings.insert(built.warnings.end(), a.warnings.begin(), a.warnings.end());
    if (a.clipped_share > kClipWarnShare)
      clipping.push_back({a.clipped_share, name, quant::MethodLabel(method)});
  }
  if (!clipping.empty()) {
    // Entropy's collapse on real models (a dense spike below the max dominating the histogram)
    // shows as clipping: the user hears it here, not only from `diagnose`.
    const Clipping& worst =
        *std::max_element(clipping.begin(), clipping.end(),
                          [](const Clipping& a, const Clipping& b) { return a.share < b.share; });
    built.warnings.push_back(fmt::format(
        "{} tensor(s) clip more than {:.0f}% of their values where max clips none (worst '{}' with {}: "
        "{:.1f}%); compare on held-out data (--compare-methods) before deploying",
        clipping.size(), 100.0 * kClipWarnShare, worst.tensor, worst.method, 100.0 * worst.share));
  }
  // Weights come from the model file, whatever the statistics source.
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*model.model->graph, sites.sites, &plan));
  // Exclusions travel with the plan, so that simulating or converting it later (eval --plan,
  // convert) leaves the same nodes without Q/DQ as the model written here.
  ir::ForEachScopedGraph(*model.model->graph, [&](const ir::Graph& g, const std::string&) {
    for (const ir::Node* n : g.nodes()) {
      if (n->name.empty()) continue;
      if (sites.placement.exclude_nodes.count(n->name)) {
        plan.float_nodes[n->name] = "excluded by request (--exclude)";
      } else if (sites.placement.exclude_op_types.count(n->op_type())) {
        plan.float_nodes[n->name] = "op type " + n->op_type() + " excluded by request (--exclude)";
      }
    }
  });
  // The float part: every measured tensor the dtype cannot hold stays FP32 (quantized activations
  // included: their Q input and the consumers of their DQ).
  plan.float_precision = sites.float_precision;
  if (plan.float_precision.dtype != quant::FloatDType::kFloat32) {
    MarkFp32Tensors(statistics, &plan.float_precision);
    if (!sites.float_tensors.empty() &&
        std::none_of(
            sites.float_tensors.begin(), sites.float_tensors.end(),
            [&](const std::string& t) { return statistics.stats.tensors.count(t) != 0; })) {
      built.warnings.push_back(fmt::format(
          "the statistics hold no range for the {} non-quantized float tensors (statistics written without "
          "--float-dtype {}): whether {} holds them was not checked",
          sites.float_tensors.size(), quant::FloatDTypeName(plan.float_precision.dtype),
          quant::FloatDTypeName(plan.float_precision.dtype)));
    }
    if (!plan.float_precision.fp32_tensors.empty()) {
      built.warnings.push_back(
          fmt::format("{} tensor(s) stay FP32: {} cannot hold their calibrated range (see "
                      "plan.json float_precision.fp32_tensors)",
                      plan.float_precision.fp32_tensors.size(),
                      quant::FloatDTypeName(plan.float_precision.dtype)));
    }
  }
  QK_RETURN_IF_ERROR(quant::ValidatePlan(plan));
  return built;
}

namespace {

// "3 Conv, 1 Gemm"
std::string CountOps(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [op, n] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, op);
  return out;
}

}  // namespace

BodyReport ReportBodies(const LoadedModel& model, const CalibrationSites& sites,
                        const quant::QuantPlan& plan) {
  const ir::Graph* main = model.model->graph.get();
  // A body's weighted op is quantized when every activation it reads is.
  std::map<const ir::Node*, bool> body_ops;
  for (const passes::QdqSite& site : sites.sites) {
    if (site.consumer->owner() == main || site.role != quant::TensorRole::kActivation) continue;
    const quant::TensorQuant* entry = plan.Find(site.tensor);
    auto [it, fresh] = body_ops.emplace(site.consumer, true);
    it->second = it->second && entry != nullptr && entry->quantized;
  }
  std::map<std::string, int> quantized, unseen, recurrent;
  for (const auto& [node, ok] : body_ops) ++(ok ? quantized : unseen)[node->op_type()];
  ir::ForEachScopedGraph(*main, [&](const ir::Graph& g, const std::string&) {
    for (const ir::Node* n : g.nodes()) {
      if (n->domain().empty() &&
          (n->op_type() == "LSTM" || n->op_type() == "GRU" || n->op_type() == "RNN")) {
        ++recurrent[n->op_type()];
      }
    }
  });
  BodyReport report;
  if (!quantized.empty()) {
    report.notes.push_back(
        fmt::format("{} inside If/Loop/Scan bodies quantized (statistics from every sample "
                    "that ran the body, every Loop/Scan iteration included)",
                    CountOps(quantized)));
  }
  if (!unseen.empty()) {
    report.warnings.push_back(
        fmt::format("{} inside If/Loop/Scan bodies stay in float: their inputs were never "
                    "computed on the calibration data (an If branch no sample took, or a "
                    "body that never ran); add samples that take it",
                    CountOps(unseen)));
  }
  if (!recurrent.empty()) {
    report.warnings.push_back(
        fmt::format("{} stay in float: TensorRT's Q/DQ recipe quantizes the inputs of "
                    "Conv, ConvTranspose, Gemm and MatMul only",
                    CountOps(recurrent)));
  }
  return report;
}

Result<ArtifactReport> WriteArtifacts(const LoadedModel& model, const quant::QuantPlan& plan,
                                      const passes::PlacementOptions& placement,
                                      const std::string& dir,
                                      const formats::TrtCacheWriteOptions& cache,
                                      passes::WeightStorage weights) {
  // All five files or none, never mixed with a concurrent run's (common/artifact_set.h).
  QK_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactSet> out,
                      ArtifactSet::Open(dir, {"model.qdq.onnx", "model.float.onnx", "calib.cache",
                                              "ranges.txt", "plan.json"}));
  quant::QuantPlan written = plan;
  QuantizedFiles files;
  files.cache = cache;
  ArtifactReport report;
  QK_ASSIGN_OR_RETURN(report.inserted, StagePlanArtifacts(model.path, *model.model, placement,
                                                          weights, &written, files, out.get()));
  QK_ASSIGN_OR_RETURN(report.written, out->Commit());
  return report;
}

}  // namespace quantkit::pipelines
