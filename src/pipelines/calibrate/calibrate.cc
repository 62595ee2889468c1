#include "pipelines/calibrate/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "analysis/collect_pass.h"
#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "common/sha256.h"
#include "data/source.h"
#include "formats/qkstats.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "passes/insert_qdq.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/evaluate/fallback.h"
#include "pipelines/quantized_artifacts.h"
#include "quantkit/version.h"
#include "runtime/device.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

// The placement of the run: none at all under --int8 off (no site, so the statistics are the
// float tensors' ranges alone, and the written model has no Q/DQ).
passes::PlacementOptions PlacementFor(const CalibrateOptions& options) {
  passes::PlacementOptions placement = options.placement;
  if (!options.int8) {
    placement.weighted_op_types.clear();
    placement.pool_op_types.clear();
    placement.quantize_residual_add = false;
  }
  return placement;
}

// Runs this rank's shard of the data through the model once (CollectStatistics,
// calibration_steps.h), filling one collector per activation. Provenance (description, fingerprint,
// sample count) names the whole data.
Status CollectShard(const CalibrateOptions& options, const LoadedModel& loaded,
                    const CalibrationSites& sites, const distributed::Communicator& comm,
                    CollectorKind kind, Statistics* statistics, CalibrateResult* result) {
  const std::vector<data::InputSpec> inputs = data::ModelInputs(*loaded.model);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(options.data, inputs, options.image));
  result->data_samples = source->num_samples();
  source = data::Take(std::move(source), options.samples);
  statistics->data_description = source->Describe();
  statistics->data_fingerprint = source->Fingerprint();
  QK_RETURN_IF_NOT(source->num_samples() > 0, StatusCode::kInvalidArgument, "{}: no samples",
                   source->Describe());
  statistics->samples = result->samples = source->num_samples();
  // Shards hold whole reads, which hold whole runs (data/run_chunks.h), so every rank runs the
  // model on exactly the runs one process would.
  const int64_t run_batch = analysis::CalibrationRunBatch(inputs, options.run_batch);
  analysis::PassOptions pass;
  pass.batch_size = options.batch_size;
  pass.run_batch = run_batch;
  source = distributed::ShardForRank(std::move(source), comm, analysis::ReadSize(*source, pass),
                                     &result->rank);
  statistics->stats.model_sha256 = loaded.sha256;
  if (source->num_samples() == 0) {
    // A rank with no samples (fewer batches than ranks) contributes empty collectors.
    for (const std::string& name : sites.activations) {
      statistics->stats.tensors.emplace(name, kind == CollectorKind::kRangeOnly
                                                  ? quant::TensorCollector::RangeOnly()
                                                  : quant::TensorCollector());
    }
    for (const std::string& name : sites.float_tensors) {
      statistics->stats.tensors.emplace(name, kind == CollectorKind::kRangeOnly
                                                  ? quant::TensorCollector::RangeOnly()
                                                  : quant::TensorCollector());
    }
    return Status::Ok();
  }
  const auto start = std::chrono::steady_clock::now();
  pass.progress = options.progress && comm.is_root();
  QK_ASSIGN_OR_RETURN(Statistics shard,
                      CollectStatistics(loaded, analysis::ReadRuns(*source, pass, inputs),
                                        source->num_samples(), sites, pass, kind));
  statistics->stats = std::move(shard.stats);
  result->rank.work_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

std::string Summarize(const CalibrateOptions& options, const CalibrateResult& r,
                      const passes::PassReport* inserted) {
  // The check's warning is in r.warnings (for the API) and printed by FormatCheck beside its
  // figure.
  const std::string& check_warning = r.check.warning;
  std::string s =
      fmt::format("quantkit {} calibrate\nmodel: {}\ndata: {}\nmethod: {}\n", QUANTKIT_VERSION,
                  options.model, r.plan.provenance.data_description, r.plan.provenance.method);
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
  s += fmt::format(
      "quantized: {} activations (per tensor), {} weights ({}); {} tensor(s) kept in float\n", act,
      weights, options.placement.per_channel_weights ? "per channel" : "per tensor", kept);
  // Layers (nodes) the plan keeps in float: --exclude, a plan's fallback.
  if (!r.plan.float_nodes.empty()) {
    s += fmt::format("{} layer(s) kept in float ({}):", r.plan.float_nodes.size(),
                     quant::FloatDTypeName(r.plan.float_precision.dtype));
    for (const auto& [node, reason] : r.plan.float_nodes) s += " " + node;
    s += "\n";
  }
  if (inserted) {
    s += fmt::format("Q/DQ pairs: {} on activations, {} on weights\n",
                     inserted->Count(passes::counter::kActivationPairs),
                     inserted->Count(passes::counter::kWeightPairs));
  }
  const quant::FloatPrecision& fp = r.plan.float_precision;
  s += fmt::format("float dtype: {}{}\n", quant::FloatDTypeName(fp.dtype),
                   fp.dtype == quant::FloatDType::kFloat32 ? ""
                   : fp.cast_io                            ? " (inputs and outputs too)"
                                : " (inputs and outputs keep their types)");
  if (inserted && fp.dtype != quant::FloatDType::kFloat32) {
    s += fmt::format("  {} node(s) kept in FP32, {} Cast(s)\n",
                     inserted->Count(passes::counter::kFp32Nodes),
                     inserted->Count(passes::counter::kCastsInserted));
    for (const std::string& n : inserted->List(passes::list::kFp32NodeReasons))
      s += "  fp32: " + n + "\n";
    for (const std::string& n : inserted->notes) s += "note: " + n + "\n";
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
  for (const std::string& line : FormatPtqReport(r.ptq)) s += line + "\n";
  if (!r.plan.initializers.empty()) {
    s += fmt::format(
        "float model: model.float.onnx holds the {} weight tensor(s) the PTQ stages changed; calib.cache "
        "and ranges.txt apply to it (and `qat` starts from it)\n",
        r.plan.initializers.size());
  }
  for (const std::string& n : r.notes) s += "note: " + n + "\n";
  for (const std::string& w : r.warnings) {
    if (w != check_warning) s += "warning: " + w + "\n";
  }
  if (options.repair) s += FormatRepair(*options.repair);
  s += FormatCheck(r.check);
  if (r.samples > 0) {
    s += fmt::format("{} samples in {:.2f} s ({:.1f} samples/s), peak RSS {}\n", r.samples,
                     r.seconds, static_cast<double>(r.samples) / std::max(r.seconds, 1e-9),
                     FormatBytes(r.peak_rss_bytes));
  }
  return s;
}

// The accuracy check of the plan written (pipelines/calibrate/check.h), into result->check and,
// beyond its thresholds, result->warnings. A check that cannot run is a warning: the calibration
// it would judge is kept.
void CheckPlan(const CalibrateOptions& options, const LoadedModel& loaded,
               const quant::QuantPlan& plan, CalibrateResult* result) {
  CheckResult& check = result->check;
  check.calibration_seconds = result->seconds;
  if (options.check.samples == 0) return;
  if (!options.check_evaluator && options.check.holdout.empty() && options.data.empty()) {
    check.skipped = "no data to check on (statistics only): give --holdout SPEC";
    return;
  }
  const std::string plan_path = options.output_dir.empty()
                                    ? std::string()
                                    : (fs::path(options.output_dir) / "plan.json").string();
  const Status judged = [&]() -> Status {
    if (options.check_evaluator) {
      check.origin = options.check_origin;
      return JudgePlan(*options.check_evaluator, plan, plan_path, /*own_evaluator=*/false, &check);
    }
    // The written model's simulation: the placement and policy calibrate writes with (the float
    // dtype travels in the plan).
    analysis::PlanEvalOptions eval;
    eval.batch_size = options.batch_size;
    eval.simulation.placement = PlacementFor(options);
    eval.simulation.mode = passes::PlacementPolicy::kTensorRT;
    QK_RETURN_IF_ERROR(ChooseCheckData(
        options.check, {options.model, options.data, result->samples, result->data_samples}, &eval,
        &check));
    if (eval.data == options.data) eval.image = options.image;
    eval.loaded = loaded.model;  // the calibrated model: no second copy of its weights
    QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::PlanEvaluator> evaluator,
                        analysis::PlanEvaluator::Create(eval));
    return JudgePlan(*evaluator, plan, plan_path, /*own_evaluator=*/true, &check);
  }();
  if (!judged.ok()) {
    check.ran = false;
    result->warnings.push_back("check: no accuracy check of the written model: " +
                               judged.message());
  } else if (!check.warning.empty()) {
    result->warnings.push_back(check.warning);
  }
}

// --stats PATH: a file of the artifact set when PATH lies in the -o directory (it appears with
// the other files or not at all, and the directory may not exist yet); elsewhere written
// atomically on its own, its directory created, once the set is staged. Nothing without PATH.
Status WriteStats(const std::string& path, const formats::StatsFile& stats, ArtifactSet* artifacts,
                  std::vector<std::string>* written) {
  if (path.empty()) return Status::Ok();
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(path, ec).lexically_normal();
  QK_RETURN_IF_NOT(!ec && target.has_filename(), StatusCode::kInvalidArgument,
                   "--stats {}: not a file path", path);
  if (artifacts &&
      fs::absolute(artifacts->Target(target.filename().string()), ec).lexically_normal() ==
          target) {
    QK_ASSIGN_OR_RETURN(std::string staged, artifacts->StageNew(target.filename().string()));
    return formats::WriteStatsFile(staged, stats);
  }
  fs::create_directories(target.parent_path(), ec);
  QK_RETURN_IF_NOT(!ec, StatusCode::kIoError, "--stats {}: cannot create directory {}: {}", path,
                   target.parent_path().string(), ec.message());
  QK_RETURN_IF_ERROR(formats::WriteStatsFile(path, stats));
  written->push_back(path);
  return Status::Ok();
}

// The -o directory's files as one set (common/artifact_set.h): all five or none, never mixed
// with a concurrent run's.
Result<std::unique_ptr<ArtifactSet>> OpenArtifacts(const CalibrateOptions& options) {
  return ArtifactSet::Open(options.output_dir, CalibrationArtifactNames(options));
}

// Rank 0 (or the only process): the plan from the merged statistics, then every artifact.
// `artifacts`: the set opened (and locked) before the collection, or null to open it now; it is
// committed here unless the caller's (options.artifacts), which the caller commits.
Status WriteOutputs(const CalibrateOptions& options, const PreparedCalibration& prepared,
                    std::unique_ptr<ArtifactSet> artifacts, CalibrateResult* result_out,
                    const ReadyPlan* ready_plan = nullptr) {
  CalibrateResult& result = *result_out;
  const auto start = std::chrono::steady_clock::now();
  quant::QuantPlan& plan = result.plan;
  std::optional<ReadyPlan> chosen;
  if (!ready_plan && options.choose_plan) {
    QK_ASSIGN_OR_RETURN(chosen, options.choose_plan(prepared));
    ready_plan = &*chosen;
  }
  if (ready_plan) {
    plan = ready_plan->plan;
    result.ptq = ready_plan->ptq;
    result.warnings.insert(result.warnings.end(), ready_plan->warnings.begin(),
                           ready_plan->warnings.end());
  } else {
    QK_ASSIGN_OR_RETURN(BuiltPlan built,
                        BuildPlan(prepared.statistics, prepared.model, prepared.sites,
                                  {options.method, options.method_overrides}));
    plan = std::move(built.plan);
    result.warnings.insert(result.warnings.end(), built.warnings.begin(), built.warnings.end());
    // The stages edit the plan (and its weights) before anything is written.
    const PtqData ptq_data{
        options.data, options.image, options.samples, {options.method, options.method_overrides}};
    QK_ASSIGN_OR_RETURN(result.ptq,
                        RunPtqStages(prepared.model, prepared.sites, ptq_data, options.ptq, &plan));
  }
  BodyReport bodies = ReportBodies(prepared.model, prepared.sites, plan);
  result.notes.insert(result.notes.end(), bodies.notes.begin(), bodies.notes.end());
  result.warnings.insert(result.warnings.end(), bodies.warnings.begin(), bodies.warnings.end());
  // Preparation (collection, merge) plus this plan: not the evaluations of --compare-methods.
  result.seconds = prepared.report.seconds +
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss_bytes = PeakRssBytes();
  result.notes.insert(result.notes.end(), options.notes.begin(), options.notes.end());
  if (ready_plan && ready_plan->check) {
    result.check = *ready_plan->check;
    result.check.calibration_seconds = result.seconds;
    if (!result.check.warning.empty()) result.warnings.push_back(result.check.warning);
  } else {
    CheckPlan(options, prepared.model, plan, &result);
  }

  if (options.output_dir.empty() && !options.artifacts) {
    result.summary = Summarize(options, result, nullptr);
    return WriteStats(options.stats_out, prepared.statistics.stats, nullptr, &result.written);
  }
  ArtifactSet* set = options.artifacts;
  if (!set) {
    if (!artifacts) {
      QK_ASSIGN_OR_RETURN(artifacts, OpenArtifacts(options));
    }
    set = artifacts.get();
  }
  QuantizedFiles files;
  files.model_name = WrittenModelName(options);
  files.implicit_int8 = options.int8;
  files.cache = options.cache;
  QK_ASSIGN_OR_RETURN(
      passes::PassReport inserted,
      StagePlanArtifacts(options.model, *prepared.model.model, PlacementFor(options),
                         options.weight_storage, &plan, files, set));
  result.summary = Summarize(options, result, &inserted);
  QK_RETURN_IF_ERROR(WriteFileAtomic(set->Stage("summary.txt"), result.summary));
  if (ready_plan && !ready_plan->layer_precisions.empty()) {
    QK_ASSIGN_OR_RETURN(std::string staged, set->StageNew("layer_precisions.txt"));
    QK_RETURN_IF_ERROR(WriteFileAtomic(staged, LayerPrecisionsFile(ready_plan->layer_precisions)));
  }
  QK_RETURN_IF_ERROR(
      WriteStats(options.stats_out, prepared.statistics.stats, set, &result.written));
  if (options.artifacts)
    return Status::Ok();  // the caller's set: it commits (and lists what it wrote)
  QK_ASSIGN_OR_RETURN(std::vector<std::string> written, artifacts->Commit());
  result.written.insert(result.written.end(), written.begin(), written.end());
  return Status::Ok();
}

// Loads the model, finds the sites and gets this rank's statistics: its shard of --data, or
// the statistics given (--from-stats, options.statistics).
Status Prepare(const CalibrateOptions& options, const distributed::Communicator& comm,
               CollectorKind kind, PreparedCalibration* prepared) {
  CalibrateResult& result = prepared->report;
  if (options.loaded_model) {
    prepared->model = *options.loaded_model;
  } else {
    QK_ASSIGN_OR_RETURN(prepared->model, LoadFloatModel(options.model));
  }
  const LoadedModel& loaded = prepared->model;
  if (loaded.upgrade.upgraded()) {
    result.notes.push_back(
        fmt::format("model upgraded from opset {} to {} (onnx version converter, "
                    "in memory; the file is unchanged)",
                    loaded.upgrade.from, loaded.upgrade.to));
  }
  if (const passes::PassReport* ifs = passes::FindReport(loaded.load_passes, "fold_constant_if");
      ifs && ifs->changed) {
    result.notes.push_back(ifs->summary + ", which is quantized");
  }
  QK_ASSIGN_OR_RETURN(prepared->sites,
                      FindCalibrationSites(loaded, PlacementFor(options), options.floats));
  // Before the data is read: an override naming nothing fails at once.
  QK_RETURN_IF_ERROR(CheckOverrides(prepared->sites, {options.method, options.method_overrides}));
  // A --holdout feeds only the check: one this model cannot take (another shape or dtype, no
  // samples, an empty file or folder) is bad input now, not a warning after the whole pass.
  if (!options.check.holdout.empty() && options.check.samples != 0 && !options.check_evaluator) {
    QK_ASSIGN_OR_RETURN(
        std::unique_ptr<data::Source> held,
        data::OpenSource(
            options.check.holdout, data::ModelInputs(*loaded.model),
            options.check.holdout == options.data ? options.image : data::ImageOptions{}));
    QK_RETURN_IF_NOT(held->num_samples() > 0, StatusCode::kInvalidArgument,
                     "--holdout {}: no samples to check on", options.check.holdout);
  }
  if (!options.from_stats.empty()) {
    QK_ASSIGN_OR_RETURN(prepared->statistics, StatisticsFromFiles(loaded, options.from_stats));
  } else if (options.statistics) {
    QK_RETURN_IF_NOT(options.statistics->stats.model_sha256.empty() ||
                         options.statistics->stats.model_sha256 == loaded.sha256,
                     StatusCode::kInvalidArgument,
                     "the statistics were collected on another model than {}", options.model);
    prepared->statistics = *options.statistics;
    result.samples = prepared->statistics.samples;
  } else {
    QK_RETURN_IF_ERROR(
        CollectShard(options, loaded, prepared->sites, comm, kind, &prepared->statistics, &result));
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared->start).count();
  return Status::Ok();
}

Status CheckSource(const CalibrateOptions& options) {
  QK_RETURN_IF_NOT(
      options.int8 || options.floats.dtype != quant::FloatDType::kFloat32,
      StatusCode::kInvalidArgument,
      "--int8 off writes the model in --float-dtype fp16 or bf16; with fp32 there is nothing to write");
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", options.batch_size);
  QK_RETURN_IF_NOT(options.run_batch.value_or(1) > 0, StatusCode::kInvalidArgument,
                   "--run-batch must be positive, got {}", options.run_batch.value_or(1));
  QK_RETURN_IF_NOT(!options.data.empty() || !options.from_stats.empty() || options.statistics,
                   StatusCode::kInvalidArgument,
                   "give calibration data (--data) or statistics (--from-stats)");
  // Beside statistics, only the PTQ stages read --data: otherwise nothing would.
  QK_RETURN_IF_NOT(
      options.from_stats.empty() || options.data.empty() || !options.ptq.stages.empty(),
      StatusCode::kInvalidArgument,
      "--from-stats takes the statistics as collected, so --data {} would be read by nothing (only "
      "--ptq reads it beside them); to check the written model on it give --holdout {}",
      options.data, options.data);
  if (!options.ptq.stages.empty()) {
    QK_RETURN_IF_ERROR(CheckPtqOptions(options.ptq));
    // Every stage changes INT8 weights or ranges: with no INT8 layer it would run on nothing.
    QK_RETURN_IF_NOT(
        options.int8, StatusCode::kInvalidArgument,
        "--ptq {} tunes the INT8 layers, and --int8 off writes none: drop one of the two",
        PtqStagesText(options.ptq.stages));
    QK_RETURN_IF_NOT(
        !options.data.empty(), StatusCode::kInvalidArgument,
        "--ptq {} fits weights on the calibration samples themselves: give --data (statistics alone "
        "do not hold them)",
        PtqStagesText(options.ptq.stages));
  }
  // A non-file where --stats goes is bad input, refused before the pass rather than an I/O
  // error after it (as -o's targets are, common/artifact_set.h).
  return CheckOutputFile(options.stats_out, "--stats");
}

}  // namespace

Status CheckCalibrateSource(const CalibrateOptions& options) { return CheckSource(options); }

std::string WrittenModelName(const CalibrateOptions& options) {
  return options.int8 ? "model.qdq.onnx"
                      : fmt::format("model.{}.onnx", quant::FloatDTypeName(options.floats.dtype));
}

std::vector<std::string> CalibrationArtifactNames(const CalibrateOptions& options) {
  if (!options.int8) return {WrittenModelName(options), "plan.json", "summary.txt"};
  return {"model.qdq.onnx", "model.float.onnx", "calib.cache",
          "ranges.txt",     "plan.json",        "summary.txt"};
}

Result<PreparedCalibration> PrepareCalibration(const CalibrateOptions& options) {
  QK_RETURN_IF_ERROR(CheckSource(options));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<distributed::Communicator> comm,
                      distributed::OpenCommunicator(options.distributed));
  QK_RETURN_IF_NOT(
      comm->world_size() == 1, StatusCode::kInvalidArgument,
      "--compare-methods runs in one process (a distributed run shards --data across the ranks)");
  PreparedCalibration prepared;
  prepared.start = std::chrono::steady_clock::now();
  QK_RETURN_IF_ERROR(Prepare(options, *comm, CollectorKind::kHistogram, &prepared));
  return prepared;
}

Result<CalibrateResult> FinishCalibration(const CalibrateOptions& options,
                                          const PreparedCalibration& prepared,
                                          const ReadyPlan* plan) {
  CalibrateResult result = prepared.report;
  QK_RETURN_IF_ERROR(WriteOutputs(options, prepared, nullptr, &result, plan));
  return result;
}

Result<CalibrateResult> Calibrate(const CalibrateOptions& options) {
  QK_RETURN_IF_ERROR(CheckSource(options));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<distributed::Communicator> comm,
                      distributed::OpenCommunicator(options.distributed));
  QK_RETURN_IF_NOT(
      comm->world_size() == 1 || (options.from_stats.empty() && !options.statistics),
      StatusCode::kInvalidArgument,
      "a distributed run shards --data across the ranks: --from-stats and --compare-methods "
      "run in one process");
  PreparedCalibration prepared;
  prepared.start = std::chrono::steady_clock::now();
  CalibrateResult& result = prepared.report;
  // Max-only fast path: no histograms when nothing will read them (under a launch the ranks then
  // exchange range-only statistics, formats/qkstats_wire.h).
  bool max_only = options.method.method == quant::CalibMethod::kMax && options.stats_out.empty() &&
                  !options.choose_plan;
  for (const auto& [key, m] : options.method_overrides) {
    max_only = max_only && m.method == quant::CalibMethod::kMax;
  }
  // Rank 0 locks the -o directory before the long collection: a second run into the same
  // directory fails at once instead of after the whole pass.
  std::unique_ptr<ArtifactSet> artifacts;
  Status opened = Status::Ok();
  if (comm->is_root() && !options.output_dir.empty() && !options.artifacts) {
    Result<std::unique_ptr<ArtifactSet>> set = OpenArtifacts(options);
    if (set.ok()) {
      artifacts = std::move(*set);
    } else {
      opened = set.status();
    }
  }
  // Every rank loads the model and collects its shard; a failure on any rank stops them all.
  const Status collected =
      opened.ok()
          ? Prepare(options, *comm,
                    max_only ? CollectorKind::kRangeOnly : CollectorKind::kHistogram, &prepared)
          : opened;
  QK_RETURN_IF_ERROR(comm->Agree(collected, "collecting statistics"));
  const auto merge_start = std::chrono::steady_clock::now();
  Result<formats::StatsFile> merged =
      distributed::MergeStatsOnRoot(*comm, std::move(prepared.statistics.stats));
  result.rank.merge_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - merge_start).count();
  result.seconds += result.rank.merge_seconds;
  if (!comm->is_root()) {
    // Wait for rank 0's outcome: its failure to merge or write fails this rank too.
    QK_RETURN_IF_ERROR(merged.status());
    QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), "writing artifacts on rank 0"));
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prepared.start).count();
    result.peak_rss_bytes = PeakRssBytes();
    return result;
  }
  const auto write_start = std::chrono::steady_clock::now();
  Status written = merged.status();
  if (merged.ok()) {
    prepared.statistics.stats = std::move(*merged);
    written = WriteOutputs(options, prepared, std::move(artifacts), &result);
  }
  result.rank.write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  QK_RETURN_IF_ERROR(comm->Agree(written, "writing artifacts on rank 0"));
  return result;
}

}  // namespace quantkit::pipelines
