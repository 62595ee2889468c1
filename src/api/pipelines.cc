// include/quantkit/pipelines.h over the internal pipelines: parse the public options (strings
// become enums here, once), call the one pipeline function, and return its report.
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/float_layers.h"
#include "analysis/layer_analysis.h"
#include "analysis/metrics.h"
#include "analysis/prefix_cache.h"
#include "analysis/qdq_lint.h"
#include "api/internal.h"
#include "common/check.h"
#include "data/source.h"
#include "formats/trt_cache.h"
#include "onnx/import.h"
#include "passes/apply_plan.h"
#include "pipelines/cache_tools.h"
#include "pipelines/calibrate/calibrate.h"
#include "pipelines/convert/convert.h"
#include "pipelines/diagnose/diagnose.h"
#include "pipelines/evaluate/evaluate.h"
#include "pipelines/evaluate/fallback.h"
#include "pipelines/plan_evaluation.h"
#include "pipelines/run_model.h"
#include "quant/method_amax.h"
#include "quantkit/pipelines.h"

namespace quantkit {
namespace {

Result<pipelines::PlanEvaluation> Open(const PlanEvaluationOptions& o) {
  analysis::PlanEvalOptions eval;
  eval.model = o.model;
  eval.data = o.data;
  eval.samples = o.samples;
  eval.batch_size = o.batch_size;
  QK_ASSIGN_OR_RETURN(distributed::DistributedOptions launch,
                      api::ToDistributedOptions(o.distributed));
  if (o.loaded_plan.valid())
    return pipelines::OpenPlanEvaluation(eval, o.loaded_plan.impl().plan, o.placement, launch);
  return pipelines::OpenPlanEvaluation(eval, o.plan, o.placement, launch);
}

}  // namespace

Result<EvaluateReport> Evaluate(const EvaluateOptions& options) {
  pipelines::EvalOptions eval;
  eval.model = options.model;
  eval.data = options.data;
  QK_ASSIGN_OR_RETURN(eval.image, api::ToImageOptions(options.image));
  eval.reference_model = options.reference_model;
  eval.plan = options.plan;
  if (options.loaded_plan.valid()) eval.loaded_plan = options.loaded_plan.impl().plan;
  QK_ASSIGN_OR_RETURN(eval.simulation.mode, passes::ParsePlacementPolicy(options.placement));
  QK_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<analysis::Metric>> metrics,
                      analysis::MakeMetrics(options.metrics));
  eval.metrics = analysis::MetricPointers(metrics);
  eval.samples = options.samples;
  eval.batch_size = options.batch_size;
  eval.save_predictions = options.save_predictions;
  eval.save_outputs = options.save_outputs;
  eval.progress = options.progress;
  QK_ASSIGN_OR_RETURN(eval.distributed, api::ToDistributedOptions(options.distributed));
  QK_ASSIGN_OR_RETURN(pipelines::EvalResult r, pipelines::Evaluate(eval));
  EvaluateReport report;
  report.samples = r.samples;
  report.top1 = r.top1;
  report.top5 = r.top5;
  if (r.agreement) {
    report.argmax_agreement = r.agreement->argmax_agreement;
    report.cosine = r.agreement->cosine;
    report.sqnr_db = r.agreement->sqnr_db;
    report.max_abs_error = r.agreement->max_abs_error;
  }
  report.metrics = r.metrics;
  report.seconds = r.seconds;
  report.model_seconds = r.model_seconds;
  report.reference_seconds = r.reference_seconds;
  report.written = r.written;
  report.warnings = r.warnings;
  api::SetRank(r.rank, &report);
  if (r.rank.rank != 0) return report;  // rank 0 holds the totals
  report.text = pipelines::FormatEval(eval, r);
  nlohmann::json j{
      {"samples", r.samples}, {"seconds", r.seconds}, {"model_seconds", r.model_seconds}};
  if (r.agreement) j["reference_seconds"] = r.reference_seconds;
  if (r.top1) j["top1"] = *r.top1, j["top5"] = *r.top5;
  if (r.agreement) {
    j["agreement"] = {{"argmax", r.agreement->argmax_agreement},
                      {"cosine", r.agreement->cosine},
                      {"sqnr_db", r.agreement->sqnr_db},
                      {"max_abs_error", r.agreement->max_abs_error}};
  }
  if (!r.metrics.empty()) j["metrics"] = r.metrics;
  if (!options.plan.empty()) j["plan"] = options.plan;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  report.json = j.dump(1);
  return report;
}

Result<AnalyzeReport> Analyze(const AnalyzeOptions& options) {
  QK_RETURN_IF_NOT(
      options.layers == "int8" || options.layers == "float" || options.layers == "both",
      StatusCode::kInvalidArgument, "layers '{}': expected int8, float or both", options.layers);
  QK_RETURN_IF_NOT(options.top >= 0, StatusCode::kInvalidArgument, "top must be >= 0, got {}",
                   options.top);
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation opened, Open(options.evaluation));
  QK_ASSIGN_OR_RETURN(auto owned,
                      pipelines::AnalyzeMetrics(options.evaluation.metrics, *opened.evaluator));
  const std::vector<analysis::Metric*> metrics = analysis::MetricPointers(owned);
  AnalyzeReport report;
  std::optional<analysis::AnalyzeResult> int8;
  std::optional<analysis::FloatLayersResult> floats;
  if (options.layers != "float") {
    analysis::AnalyzeOptions analyze;
    analyze.accumulated = options.accumulated;
    analyze.progress = options.progress;
    QK_ASSIGN_OR_RETURN(int8,
                        analysis::AnalyzeLayers(*opened.evaluator, opened.plan, metrics, analyze));
    for (const analysis::LayerRow& row : int8->rows) report.ranked_tensors.push_back(row.tensor);
  }
  if (options.layers != "int8") {
    analysis::FloatLayersOptions check;
    check.progress = options.progress;
    // Its errors (an FP32 float part: nothing to check) name the plan given.
    const std::string plan_name = options.evaluation.loaded_plan.valid()
                                      ? std::string("the plan given")
                                      : options.evaluation.plan;
    Result<analysis::FloatLayersResult> checked =
        analysis::AnalyzeFloatLayers(*opened.evaluator, opened.plan, metrics, check);
    if (!checked.ok()) return checked.status().WithContext(plan_name);
    floats = std::move(checked.value());
    report.keep_fp32 = floats->keep_fp32;
  }
  report.warnings = opened.warnings;
  const double seconds = (int8 ? int8->seconds : 0.0) + (floats ? floats->seconds : 0.0);
  const int64_t trials = (int8 ? int8->trials + 1 : 0) + (floats ? floats->trials : 0);
  api::SetRank(opened.Rank(seconds, trials), &report);
  if (report.rank != 0) return report;  // every rank has the numbers; rank 0 the text
  report.text = analysis::FormatAnalyzeReport(int8 ? &*int8 : nullptr, floats ? &*floats : nullptr,
                                              static_cast<size_t>(options.top));
  report.json = analysis::AnalyzeReportJson(int8 ? &*int8 : nullptr, floats ? &*floats : nullptr);
  return report;
}

static_assert((kDefaultTrialCacheMib << 20) == analysis::kDefaultPrefixCacheBytes);

Result<FallbackReport> Fallback(const FallbackOptions& options) {
  // Every option converted and checked before the data is opened.
  constexpr int64_t kMaxTrialCacheMib = 1 << 20;  // 1 TiB
  QK_RETURN_IF_NOT(
      std::isfinite(options.budget) && options.budget >= 0 && options.budget <= api::kMaxBudget,
      StatusCode::kInvalidArgument, "budget must be in [0, {}], got {}", api::kMaxBudget,
      options.budget);
  QK_RETURN_IF_NOT(options.max_float_layers >= 0, StatusCode::kInvalidArgument,
                   "max_float_layers must be >= 0 (0: no limit), got {}", options.max_float_layers);
  QK_RETURN_IF_NOT(options.trial_cache_mib >= 0 && options.trial_cache_mib <= kMaxTrialCacheMib,
                   StatusCode::kInvalidArgument, "trial_cache_mib must be in [0, {}], got {}",
                   kMaxTrialCacheMib, options.trial_cache_mib);
  QK_RETURN_IF_NOT(options.float_precision == "fp16" || options.float_precision == "fp32",
                   StatusCode::kInvalidArgument, "float_precision '{}': use fp16 or fp32",
                   options.float_precision);
  pipelines::FallbackOptions fallback;
  fallback.budget = options.budget;
  fallback.max_float_layers = options.max_float_layers;
  fallback.output_dir = options.output_dir;
  fallback.float_precision = options.float_precision;
  QK_ASSIGN_OR_RETURN(fallback.floats, api::ToFloatOverride(options.floats));
  QK_ASSIGN_OR_RETURN(fallback.weight_storage,
                      passes::ParseWeightStorage(options.floats.weight_storage));
  fallback.trial_cache_bytes = options.trial_cache_mib << 20;
  fallback.progress = options.progress;
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation opened, Open(options.evaluation));
  QK_RETURN_IF_NOT(options.evaluation.metrics.size() <= 1, StatusCode::kInvalidArgument,
                   "fallback searches on one metric, got {}", options.evaluation.metrics.size());
  QK_ASSIGN_OR_RETURN(
      std::unique_ptr<analysis::Metric> metric,
      pipelines::FallbackMetric(
          options.evaluation.metrics.empty() ? "" : options.evaluation.metrics.front(),
          *opened.evaluator));
  QK_ASSIGN_OR_RETURN(
      pipelines::FallbackResult r,
      pipelines::RunFallback(*opened.evaluator, opened.plan, metric.get(), fallback));
  FallbackReport report;
  report.plan = api::MakePublicPlan(r.plan);
  report.float_layers.assign(r.search.float_layers.begin(), r.search.float_layers.end());
  report.fp32_value = r.fp32_value;
  report.int8_value = r.int8_value;
  report.final_value = r.final_value;
  report.within_budget = r.search.within_budget;
  report.layer_precisions = r.layer_precisions;
  report.written = r.written;
  report.warnings = opened.warnings;
  // Every rank took the same decisions; rank 0 wrote the files and has the text.
  api::SetRank(opened.Rank(r.search.seconds + r.full_eval_seconds, r.search.evaluations + 1),
               &report);
  if (report.rank != 0) return report;
  report.text = pipelines::FormatFallback(r);
  report.json = pipelines::FallbackJson(r);
  return report;
}

static_assert(kMaxDiagnoseChunks == pipelines::kMaxChunks &&
              kMaxDiagnoseResamples == pipelines::kMaxResamples);

Result<DiagnoseReport> Diagnose(const DiagnoseOptions& options) {
  pipelines::DiagnoseOptions d;
  d.model = options.model;
  d.data = options.data;
  d.reference_data = options.reference_data;
  QK_RETURN_IF_NOT(
      options.samples >= 0 && options.reference_samples >= 0 && options.batch_size > 0 &&
          options.batch_check_samples >= 0,
      StatusCode::kInvalidArgument,
      "samples, reference_samples and batch_check_samples must be >= 0 and batch_size > 0");
  d.samples = options.samples;
  d.reference_samples = options.reference_samples;
  d.batch_size = options.batch_size;
  QK_ASSIGN_OR_RETURN(d.method, quant::ParseMethod(options.method));
  if (!options.expect.empty()) {
    QK_ASSIGN_OR_RETURN(d.expect, pipelines::ParseExpectation(options.expect));
  }
  d.placement = api::ToPlacementOptions(options.placement);
  QK_RETURN_IF_NOT(options.chunks >= 1 && options.chunks <= kMaxDiagnoseChunks,
                   StatusCode::kInvalidArgument, "chunks must be in [1, {}], got {}",
                   kMaxDiagnoseChunks, options.chunks);
  QK_RETURN_IF_NOT(options.bootstrap >= 0 && options.bootstrap <= kMaxDiagnoseResamples &&
                       options.subsets >= 0 && options.subsets <= kMaxDiagnoseResamples,
                   StatusCode::kInvalidArgument,
                   "bootstrap and subsets must be in [0, {}], got {} and {}", kMaxDiagnoseResamples,
                   options.bootstrap, options.subsets);
  d.chunks = static_cast<int>(options.chunks);
  d.bootstrap = static_cast<int>(options.bootstrap);
  d.subsets = static_cast<int>(options.subsets);
  d.seed = options.seed;
  for (const double t : {options.ci_tolerance, options.cv_tolerance}) {
    QK_RETURN_IF_NOT(std::isfinite(t) && t > 0 && t <= 1, StatusCode::kInvalidArgument,
                     "ci_tolerance and cv_tolerance must be in (0, 1], got {}", t);
  }
  d.ci_tolerance = options.ci_tolerance;
  d.cv_tolerance = options.cv_tolerance;
  d.batch_check_samples = options.batch_check_samples;
  d.output_dir = options.output_dir;
  d.progress = options.progress;
  QK_ASSIGN_OR_RETURN(d.distributed, api::ToDistributedOptions(options.distributed));
  QK_ASSIGN_OR_RETURN(pipelines::DiagnoseResult r, pipelines::Diagnose(d));
  DiagnoseReport report;
  report.clean = r.clean;
  report.enough = r.enough;
  report.suggested_samples = r.suggested_samples;
  for (const pipelines::Finding& f : r.findings)
    report.findings.push_back(f.severity + ": " + f.message);
  report.written = r.written;
  // Under a launch rank 0 has the whole report; every rank its line.
  api::SetRank(r.rank, &report);
  if (report.rank != 0) return report;
  report.text = r.summary;
  for (const std::string& f : r.written) report.text += "wrote " + f + "\n";
  report.json = pipelines::DiagnoseJson(r);
  return report;
}

Result<ConvertReport> Convert(const ConvertOptions& options) {
  pipelines::ConvertOptions c;
  c.input = options.input;
  c.output = options.output;
  c.model = options.model;
  QK_ASSIGN_OR_RETURN(passes::PlacementPolicy policy,
                      passes::ParsePlacementPolicy(options.placement));
  QK_RETURN_IF_NOT(policy != passes::PlacementPolicy::kAuto, StatusCode::kInvalidArgument,
                   "convert placement: use tensorrt or plan");
  c.placement_from_plan = policy == passes::PlacementPolicy::kPlan;
  c.qdq_output = options.qdq_output;
  QK_ASSIGN_OR_RETURN(c.cache, api::ToTrtCacheOptions(options.cache));
  QK_ASSIGN_OR_RETURN(c.floats, api::ToFloatOverride(options.floats));
  QK_ASSIGN_OR_RETURN(c.weight_storage, passes::ParseWeightStorage(options.floats.weight_storage));
  QK_RETURN_IF_NOT(options.float_precision == "fp16" || options.float_precision == "fp32",
                   StatusCode::kInvalidArgument, "float_precision '{}': use fp16 or fp32",
                   options.float_precision);
  c.float_precision = options.float_precision;
  c.data = options.data;
  QK_ASSIGN_OR_RETURN(c.image, api::ToImageOptions(options.image));
  QK_RETURN_IF_NOT(options.samples >= 0 && options.batch_size > 0, StatusCode::kInvalidArgument,
                   "samples must be >= 0 and batch_size > 0, got {} and {}", options.samples,
                   options.batch_size);
  c.samples = options.samples;
  c.batch_size = options.batch_size;
  QK_ASSIGN_OR_RETURN(pipelines::ConvertResult r, pipelines::Convert(c));
  return ConvertReport{r.written, r.messages, r.layer_precisions, pipelines::ConvertResultJson(r)};
}

Result<CacheInspectReport> InspectCache(const std::string& path) {
  QK_ASSIGN_OR_RETURN(formats::TrtCache cache, formats::ReadTrtCache(path));
  CacheInspectReport report;
  report.entries = static_cast<int>(cache.scales.size());
  report.bad_scales = pipelines::CountBadScales(cache);
  report.problems = report.bad_scales;
  report.text = pipelines::InspectCacheText(cache);
  report.json = pipelines::InspectCacheJson(cache);
  return report;
}

Result<CacheDiffReport> DiffCaches(const std::string& a_path, const std::string& b_path,
                                   double rtol) {
  QK_RETURN_IF_NOT(std::isfinite(rtol) && rtol >= 0, StatusCode::kInvalidArgument,
                   "rtol must be >= 0, got {}", rtol);
  QK_ASSIGN_OR_RETURN(formats::TrtCache a, formats::ReadTrtCache(a_path));
  QK_ASSIGN_OR_RETURN(formats::TrtCache b, formats::ReadTrtCache(b_path));
  const pipelines::CacheDiff d = pipelines::DiffCaches(a, b, rtol);
  CacheDiffReport report;
  report.added = d.added;
  report.removed = d.removed;
  for (const pipelines::CacheDiff::Change& c : d.changed) report.changed.push_back(c.tensor);
  report.header_differs = d.header_differs;
  report.problems = static_cast<int>(d.added.size() + d.removed.size() + d.changed.size()) +
                    (d.header_differs ? 1 : 0);
  report.text = pipelines::FormatCacheDiff(d, a, b);
  return report;
}

Result<CacheCheckReport> CheckCache(const CacheCheckOptions& options) {
  std::optional<formats::TrtVersion> version;
  if (!options.trt_version.empty()) {
    QK_ASSIGN_OR_RETURN(version, formats::ParseTrtVersion(options.trt_version));
  }
  std::optional<formats::TrtCalibrator> calibrator;
  if (!options.calibrator.empty()) {
    QK_ASSIGN_OR_RETURN(calibrator, formats::ParseTrtCalibrator(options.calibrator));
  }
  QK_ASSIGN_OR_RETURN(formats::TrtCache cache, formats::ReadTrtCache(options.cache));
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(options.model));
  QK_ASSIGN_OR_RETURN(pipelines::CacheCheck c,
                      pipelines::CheckCache(cache, *model.graph, version, calibrator));
  CacheCheckReport report{c.missing,
                          c.stale,
                          c.header_issues,
                          c.bad_scales,
                          c.matched,
                          0,
                          pipelines::FormatCacheCheck(c)};
  report.problems = static_cast<int>(c.missing.size() + c.stale.size() + c.header_issues.size() +
                                     c.bad_scales.size());
  return report;
}

Result<WriteDataReport> WriteData(const WriteDataOptions& options) {
  QK_RETURN_IF_NOT(options.samples >= 0, StatusCode::kInvalidArgument,
                   "samples must be >= 0 (0: all), got {}", options.samples);
  QK_ASSIGN_OR_RETURN(data::ImageOptions image, api::ToImageOptions(options.image));
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(options.model));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(options.data, data::ModelInputs(model), image));
  std::unique_ptr<data::Source> first = data::Take(std::move(source), options.samples);
  QK_RETURN_IF_ERROR(data::DumpSamples(*first, options.output_dir));
  WriteDataReport report;
  report.source = first->Describe();
  report.text = report.source + " -> " + options.output_dir + "\n";
  return report;
}

Result<LintReport> Lint(const LintOptions& options) {
  QK_ASSIGN_OR_RETURN(analysis::LintReport linted, analysis::LintModelFile(options.model));
  LintReport report;
  for (const analysis::LintFinding& f : linted.findings) {
    report.findings.push_back(
        {f.rule, analysis::SeverityName(f.severity), f.node, f.op_type, f.message, f.why, f.fix});
  }
  report.quantize_nodes = linted.num_q;
  report.dequantize_nodes = linted.num_dq;
  const analysis::Severity worst = linted.Worst();
  report.worst = analysis::SeverityName(worst);
  report.exit_code = worst == analysis::Severity::kError     ? 2
                     : worst == analysis::Severity::kWarning ? 1
                                                             : 0;
  report.text = analysis::FormatLintText(linted);
  report.json = analysis::FormatLintJson(linted);
  return report;
}

Result<RunReport> Run(const RunOptions& options) {
  pipelines::RunModelOptions r;
  r.model_path = options.model;
  r.inputs.assign(options.inputs.begin(), options.inputs.end());
  r.output_dir = options.output_dir;
  r.dump = options.dump;
  r.dump_all = options.dump_all;
  QK_ASSIGN_OR_RETURN(std::vector<pipelines::TensorSummary> summaries, pipelines::RunModelFiles(r));
  RunReport report;
  for (const pipelines::TensorSummary& s : summaries) {
    report.outputs.push_back(s.ToString());
    report.written.push_back(s.path);
  }
  return report;
}

}  // namespace quantkit
