#include "pipelines/calibrate.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "common/check.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "data/source.h"
#include "formats/qkstats.h"
#include "quantkit/version.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

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
  for (const std::string& w : r.warnings) s += "warning: " + w + "\n";
  if (r.samples > 0) {
    s += fmt::format("{} samples in {:.2f} s ({:.1f} samples/s), peak RSS {}\n", r.samples, r.seconds,
                     static_cast<double>(r.samples) / std::max(r.seconds, 1e-9),
                     FormatBytes(r.peak_rss_bytes));
  }
  return s;
}

}  // namespace

Result<CalibrationRun> PrepareCalibration(const CalibrateOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", options.batch_size);
  QK_RETURN_IF_NOT(!options.data.empty() || !options.from_stats.empty(), StatusCode::kInvalidArgument,
                   "give calibration data (--data) or statistics (--from-stats)");
  const auto start = std::chrono::steady_clock::now();
  CalibrationRun run;
  QK_ASSIGN_OR_RETURN(run.model, LoadFloatModel(options.model));
  QK_ASSIGN_OR_RETURN(run.sites, FindCalibrationSites(run.model, options.placement));
  if (!options.from_stats.empty()) {
    QK_ASSIGN_OR_RETURN(run.statistics, StatisticsFromFiles(run.model, options.from_stats));
  } else {
    QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                        data::OpenSource(options.data, data::ModelInputs(*run.model.model), options.image));
    source = data::Take(std::move(source), options.samples);
    analysis::PassOptions pass;
    pass.batch_size = options.batch_size;
    pass.progress = options.progress;
    QK_ASSIGN_OR_RETURN(run.statistics, CollectStatistics(run.model, *source, run.sites, pass));
  }
  if (!options.stats_out.empty()) {
    QK_RETURN_IF_ERROR(formats::WriteStatsFile(options.stats_out, run.statistics.stats));
    run.written.push_back(options.stats_out);
  }
  run.collect_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

Result<CalibrateResult> FinishCalibration(const CalibrationRun& run, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CalibrateResult result;
  result.written = run.written;
  result.samples = run.statistics.samples;
  QK_ASSIGN_OR_RETURN(BuiltPlan built,
                      BuildPlan(run.statistics, run.model, run.sites, {options.method, options.method_overrides}));
  result.plan = std::move(built.plan);
  result.warnings = std::move(built.warnings);
  result.seconds = run.collect_seconds +
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss_bytes = PeakRssBytes();
  if (options.output_dir.empty()) {
    result.summary = Summarize(options, result, nullptr);
    return result;
  }
  QK_ASSIGN_OR_RETURN(ArtifactReport artifacts, WriteArtifacts(run.model, result.plan, options.placement,
                                                               options.output_dir, options.cache));
  result.summary = Summarize(options, result, &artifacts.inserted);
  const std::string summary_path = (fs::path(options.output_dir) / "summary.txt").string();
  QK_RETURN_IF_ERROR(WriteFileAtomic(summary_path, result.summary));
  result.written.insert(result.written.end(), artifacts.written.begin(), artifacts.written.end());
  result.written.push_back(summary_path);
  return result;
}

Result<CalibrateResult> Calibrate(const CalibrateOptions& options) {
  QK_ASSIGN_OR_RETURN(CalibrationRun run, PrepareCalibration(options));
  return FinishCalibration(run, options);
}

}  // namespace quantkit::pipelines
