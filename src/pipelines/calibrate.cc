#include "pipelines/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_set>

#include "analysis/collect_pass.h"
#include "analysis/diagnose/stats.h"
#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/text.h"
#include "passes/apply_plan.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "common/sha256.h"
#include "data/source.h"
#include "formats/qkstats.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/insert_qdq.h"
#include "quant/method_amax.h"
#include "quantkit/version.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

// A non-max method that clips more than this share of a tensor's values is reported: diagnose's
// entropy_clips threshold, the level at which the issue-20 models lost their accuracy.
constexpr double kClipWarnShare = 0.01;

// Runs this rank's shard of the data through the model once, filling one collector per
// activation. Provenance (description, fingerprint, sample count) names the whole data.
Status CollectStatistics(const CalibrateOptions& options, ir::Model model,
                         const std::vector<std::string>& activations, const runtime::Communicator& comm,
                         formats::StatsFile* stats, CalibrateResult* result, std::string* data_description,
                         std::string* data_fingerprint) {
  const std::vector<data::InputSpec> inputs = data::ModelInputs(model);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, data::OpenSource(options.data, inputs, options.image));
  source = data::Take(std::move(source), options.samples);
  *data_description = source->Describe();
  *data_fingerprint = source->Fingerprint();
  QK_RETURN_IF_NOT(source->num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source->Describe());
  result->samples = source->num_samples();
  // Shards hold whole batches (as the model takes them), so every rank runs the batches one
  // process would.
  source = ShardForRank(std::move(source), comm, data::EffectiveBatchSize(*source, options.batch_size),
                        &result->rank);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interpreter,
                      runtime::Interpreter::Create(std::move(model)));
  // Max-only fast path: no histograms when nothing will read them (one process: ranks exchange
  // .qkstats text, which carries histograms).
  bool max_only = options.method.method == quant::CalibMethod::kMax && options.stats_out.empty() &&
                  options.shared_stats == nullptr && comm.world_size() == 1;
  for (const auto& [key, m] : options.method_overrides) {
    max_only = max_only && m.method == quant::CalibMethod::kMax;
  }
  for (const std::string& name : activations) {
    stats->tensors.emplace(name, max_only ? quant::TensorCollector::RangeOnly() : quant::TensorCollector());
  }
  // A rank with no samples (fewer batches than ranks) contributes empty collectors.
  if (source->num_samples() == 0) return Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  analysis::CollectingObserver observer(&stats->tensors);
  analysis::PassOptions pass;
  pass.batch_size = options.batch_size;
  pass.run_batch = analysis::kSampleExactRunBatch;  // determinism by construction (collect_pass.h)
  pass.progress = options.progress && comm.is_root();
  QK_RETURN_IF_ERROR(analysis::RunPass(*interpreter, *source, pass, {&observer}));
  result->rank.work_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

const quant::MethodRequest& MethodFor(const std::string& tensor, const std::string& consumer_op,
                                      const CalibrateOptions& options) {
  if (auto it = options.method_overrides.find(tensor); it != options.method_overrides.end()) {
    return it->second;
  }
  if (auto it = options.method_overrides.find(consumer_op); it != options.method_overrides.end()) {
    return it->second;
  }
  return options.method;
}

// "3 Conv, 1 Gemm" for the weighted ops that sit in control-flow bodies ("" when none): the user
// must hear that they were left in float rather than see "0 activations" and no reason.
std::string WeightedOpsInSubgraphs(ir::Graph& graph, const passes::PlacementOptions& placement) {
  std::map<std::string, int> counts;
  for (ir::Node* node : graph.nodes()) {
    for (ir::Attribute& attr : node->attributes()) {
      for (auto& sub : attr.graphs) {
        ir::ForEachGraph(*sub, [&](ir::Graph& g) {
          for (const ir::Node* n : g.nodes()) {
            if (placement.weighted_op_types.count(n->op_type())) ++counts[n->op_type()];
          }
        });
      }
    }
  }
  std::string out;
  for (const auto& [op, n] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, op);
  return out;
}

std::string Summarize(const CalibrateOptions& options, const CalibrateResult& r,
                      const passes::InsertQdqReport* inserted) {
  std::string s = fmt::format("quantkit {} calibrate\nmodel: {}\ndata: {}\nmethod: {}\n",
                              QUANTKIT_VERSION, options.model, r.plan.provenance.data_description,
                              r.plan.provenance.method);
  int act = 0, weights = 0, kept = 0;
  for (const auto& [name, t] : r.plan.tensors) {
    if (!t.quantized) {
      ++kept;
    } else if (t.role == quant::TensorRole::kWeight) {
      ++weights;
    } else {
      ++act;
    }
  }
  s += fmt::format("quantized: {} activations (per tensor), {} weights ({}); {} kept in float\n",
                   act, weights,
                   options.placement.per_channel_weights ? "per channel" : "per tensor", kept);
  if (inserted) {
    s += fmt::format("Q/DQ pairs: {} on activations, {} on weights\n", inserted->activation_pairs,
                     inserted->weight_pairs);
  }
  for (const auto& [name, t] : r.plan.tensors) {
    if (!t.quantized) s += fmt::format("  float: {}: {}\n", name, t.reason);
  }
  if (!options.placement.exclude_nodes.empty() || !options.placement.exclude_op_types.empty()) {
    s += "excluded by request:";
    for (const auto& n : options.placement.exclude_nodes) s += " node " + n;
    for (const auto& o : options.placement.exclude_op_types) s += " op " + o;
    s += "\n";
  }
  for (const std::string& n : r.notes) s += "note: " + n + "\n";
  for (const std::string& w : r.warnings) s += "warning: " + w + "\n";
  if (r.samples > 0) {
    s += fmt::format("{} samples in {:.2f} s ({:.1f} samples/s), peak RSS {}\n", r.samples, r.seconds,
                     static_cast<double>(r.samples) / std::max(r.seconds, 1e-9),
                     FormatBytes(r.peak_rss_bytes));
  }
  return s;
}

// Rank 0 (or the only process): the plan from the merged statistics, then every artifact.
Status WriteOutputs(const CalibrateOptions& options, const formats::StatsFile& stats,
                    const std::string& model_sha, const std::string& data_description,
                    const std::string& data_fingerprint, const std::vector<std::string>& activations,
                    const std::map<std::string, std::string>& consumer_op,
                    std::chrono::steady_clock::time_point start, ArtifactSet* artifacts,
                    CalibrateResult* result_out) {
  CalibrateResult& result = *result_out;
  if (!options.stats_out.empty()) {
    QK_RETURN_IF_ERROR(formats::WriteStatsFile(options.stats_out, stats));
    result.written.push_back(options.stats_out);
  }

  // Plan: activations from the statistics, weights per channel from the initializers.
  quant::QuantPlan& plan = result.plan;
  std::vector<std::pair<double, std::string>> clipping;  // (share clipped, tensor), non-max methods
  plan.provenance = {model_sha, data_description, data_fingerprint,
                     quant::MethodLabel(options.method), QUANTKIT_VERSION, result.samples};
  for (const std::string& name : activations) {
    auto it = stats.tensors.find(name);
    if (it == stats.tensors.end()) {
      result.warnings.push_back(fmt::format("tensor '{}' has no statistics (not produced by the "
                                            "run, or missing from the .qkstats files)", name));
      continue;
    }
    const quant::RangeStats& range = it->second.range();
    const quant::MethodRequest& method = MethodFor(name, consumer_op.count(name) ? consumer_op.at(name) : std::string(), options);
    QK_ASSIGN_OR_RETURN(quant::CalibResult amax, quant::AmaxFromCollector(it->second, method));
    if (method.method != quant::CalibMethod::kMax && amax.amax > 0) {
      const double share = analysis::ShareAbove(it->second.histogram(), amax.amax);
      if (share > kClipWarnShare) clipping.emplace_back(share, name);
    }
    quant::TensorQuant& t = plan.SetActivationAmax(name, amax.amax, quant::MethodLabel(method));
    const int64_t nonfinite = range.nan_count + range.posinf_count + range.neginf_count;
    if (nonfinite > 0) {
      const std::string w = fmt::format("tensor '{}': {} NaN and {} Inf of {} values were left out "
                                        "of its statistics",
                                        name, range.nan_count, range.posinf_count + range.neginf_count,
                                        range.count);
      result.warnings.push_back(w);
      t.reason = t.reason.empty() ? w : t.reason + "; " + w;
    }
    if (!t.quantized) {
      result.warnings.push_back(fmt::format("tensor '{}' never varies (amax {}): kept in float, no "
                                            "zero scale written",
                                            name, range.amax));
    }
  }
  if (!clipping.empty()) {
    // Entropy's collapse on real models (a dense spike below the max dominating the histogram)
    // shows as clipping: the user hears it here, not only from `diagnose`.
    std::sort(clipping.rbegin(), clipping.rend());
    result.warnings.push_back(fmt::format(
        "{} tensor(s) clip more than {:.0f}% of their values with {} where max clips none (worst '{}': "
        "{:.1f}%); compare on held-out data (--compare-methods) before deploying",
        clipping.size(), 100.0 * kClipWarnShare, quant::MethodLabel(options.method), clipping.front().second,
        100.0 * clipping.front().first));
  }
  // Weights come from the model file, whatever the statistics source.
  QK_ASSIGN_OR_RETURN(ir::Model qdq_model, analysis::LoadModelForQuantization(options.model));
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> qdq_sites,
                      passes::FindQdqSites(*qdq_model.graph, options.placement));
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*qdq_model.graph, qdq_sites, &plan));
  // Exclusions travel with the plan, so that simulating or converting it later (eval --plan,
  // convert) leaves the same nodes without Q/DQ as the model written here.
  for (const ir::Node* n : qdq_model.graph->nodes()) {
    if (n->name.empty()) continue;
    if (options.placement.exclude_nodes.count(n->name)) {
      plan.float_nodes[n->name] = "excluded by request (--exclude)";
    } else if (options.placement.exclude_op_types.count(n->op_type())) {
      plan.float_nodes[n->name] = "op type " + n->op_type() + " excluded by request (--exclude)";
    }
  }
  QK_RETURN_IF_ERROR(quant::ValidatePlan(plan));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss_bytes = PeakRssBytes();

  if (artifacts == nullptr) {  // no -o
    result.summary = Summarize(options, result, nullptr);
    return Status::Ok();
  }
  // The one plan -> Q/DQ code (passes::ApplyPlan): the sites above plus the plan's float_nodes.
  passes::ApplyPlanOptions apply;
  apply.placement = options.placement;
  apply.mode = passes::PlacementPolicy::kTensorRT;
  QK_ASSIGN_OR_RETURN(passes::InsertQdqReport inserted, passes::ApplyPlan(qdq_model, &plan, apply));
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(qdq_model, artifacts->Stage("model.qdq.onnx")));
  QK_RETURN_IF_ERROR(formats::WriteTrtCache(artifacts->Stage("calib.cache"), plan, options.cache));
  QK_RETURN_IF_ERROR(formats::WriteRangesText(artifacts->Stage("ranges.txt"), plan));
  QK_RETURN_IF_ERROR(formats::WritePlanJson(artifacts->Stage("plan.json"), plan));
  result.summary = Summarize(options, result, &inserted);
  QK_RETURN_IF_ERROR(WriteFileAtomic(artifacts->Stage("summary.txt"), result.summary));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> written, artifacts->Commit());
  result.written.insert(result.written.end(), written.begin(), written.end());
  return Status::Ok();
}

}  // namespace

Result<CalibrateResult> Calibrate(const CalibrateOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", options.batch_size);
  QK_RETURN_IF_NOT(!options.data.empty() || !options.from_stats.empty() ||
                       (options.shared_stats && options.shared_stats->filled),
                   StatusCode::kInvalidArgument,
                   "give calibration data (--data) or statistics (--from-stats)");
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Communicator> comm, OpenCommunicator(options.distributed));
  QK_RETURN_IF_NOT(comm->world_size() == 1 || (options.from_stats.empty() && !options.shared_stats),
                   StatusCode::kInvalidArgument,
                   "a distributed run shards --data across the ranks: --from-stats and --compare-methods "
                   "run in one process");
  const auto start = std::chrono::steady_clock::now();
  CalibrateResult result;
  std::string model_sha, data_description, data_fingerprint;
  std::vector<std::string> activations;
  std::map<std::string, std::string> consumer_op;
  formats::StatsFile stats;
  // All five files or none, never mixed with a concurrent run's (common/artifact_set.h).
  std::unique_ptr<ArtifactSet> artifacts;
  // Every rank loads the model and collects its shard; a failure on any rank stops them all.
  const Status collected = [&]() -> Status {
    // Rank 0 locks -o before the (long) collection pass: a second run into the same directory
    // fails at once, not after minutes of work.
    if (comm->is_root() && !options.output_dir.empty()) {
      QK_ASSIGN_OR_RETURN(artifacts, ArtifactSet::Open(options.output_dir, {"model.qdq.onnx", "calib.cache",
                                                                            "ranges.txt", "plan.json", "summary.txt"}));
    }
    QK_ASSIGN_OR_RETURN(model_sha, Sha256OfFile(options.model));
    onnx_io::OpsetUpgrade upgrade;
    QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(options.model, &upgrade));
    if (upgrade.upgraded()) {
      result.notes.push_back(fmt::format("model upgraded from opset {} to {} (onnx version converter, "
                                         "in memory; the file is unchanged)",
                                         upgrade.from, upgrade.to));
    }
    // A model that already holds Q/DQ (a QAT export) would get a second quantization stacked on
    // its own; its scales are the plan, which `convert` extracts.
    int64_t qdq_nodes = 0;
    for (const ir::Node* n : model.graph->nodes()) {
      qdq_nodes += n->op_type() == "QuantizeLinear" || n->op_type() == "DequantizeLinear";
    }
    QK_RETURN_IF_NOT(qdq_nodes == 0, StatusCode::kUnsupported,
                     "{}: the model already has {} QuantizeLinear/DequantizeLinear nodes (a QAT or "
                     "quantized export); use `quantkit convert` to extract its plan and artifacts, or "
                     "calibrate the float model",
                     options.model, qdq_nodes);
    QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites,
                        passes::FindQdqSites(*model.graph, options.placement));
    if (std::string inside = WeightedOpsInSubgraphs(*model.graph, options.placement); !inside.empty()) {
      result.warnings.push_back(fmt::format(
          "{} inside If/Loop/Scan bodies stay in float: Q/DQ placement covers the main graph only{}",
          inside, sites.empty() ? " (nothing else to quantize: 0 activations)" : ""));
    }
    activations = passes::ActivationTensors(sites);
    for (const passes::QdqSite& s : sites) consumer_op.emplace(s.tensor, s.consumer->op_type());
    // An override naming nothing quantized would silently calibrate with the default method.
    for (const auto& [key, method] : options.method_overrides) {
      bool known = std::binary_search(activations.begin(), activations.end(), key);
      for (const auto& [tensor, op] : consumer_op) known = known || op == key;
      if (known) continue;
      std::vector<std::string> candidates = activations;
      for (const auto& [tensor, op] : consumer_op) candidates.push_back(op);
      return MakeStatus(StatusCode::kNotFound,
                        "--override '{}' names no quantized activation tensor and no consumer op type{}",
                        EscapeControl(key), DidYouMean(key, candidates, "quantized activations and consumer op types"));
    }
    stats.model_sha256 = model_sha;
    if (!options.from_stats.empty()) {
      QK_ASSIGN_OR_RETURN(stats, formats::MergeStatsFiles(options.from_stats, model_sha));
      data_description = fmt::format("statistics from {} file(s)", options.from_stats.size());
      for (const std::string& f : options.from_stats) data_description += " " + f;
      data_fingerprint = "qkstats";
    } else if (options.shared_stats && options.shared_stats->filled) {
      stats = options.shared_stats->stats;
      data_description = options.shared_stats->data_description;
      data_fingerprint = options.shared_stats->data_fingerprint;
      result.samples = options.shared_stats->samples;
    } else {
      QK_RETURN_IF_ERROR(CollectStatistics(options, std::move(model), activations, *comm, &stats, &result,
                                           &data_description, &data_fingerprint));
      if (options.shared_stats) {
        *options.shared_stats = {stats, data_description, data_fingerprint, result.samples, true};
      }
    }
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm->Agree(collected, "collecting statistics"));
  const auto merge_start = std::chrono::steady_clock::now();
  Result<formats::StatsFile> merged = MergeStatsOnRoot(*comm, std::move(stats));
  result.rank.merge_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - merge_start).count();
  if (!comm->is_root()) {
    // Wait for rank 0's outcome: its failure to merge or write fails this rank too.
    QK_RETURN_IF_ERROR(merged.status());
    QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), "writing artifacts on rank 0"));
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.peak_rss_bytes = PeakRssBytes();
    return result;
  }
  const auto write_start = std::chrono::steady_clock::now();
  const Status written = merged.ok() ? WriteOutputs(options, *merged, model_sha, data_description,
                                                    data_fingerprint, activations, consumer_op, start,
                                                    artifacts.get(), &result)
                                     : merged.status();
  result.rank.write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  QK_RETURN_IF_ERROR(comm->Agree(written, "writing artifacts on rank 0"));
  return result;
}

}  // namespace quantkit::pipelines
