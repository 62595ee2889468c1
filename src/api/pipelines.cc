// include/quantkit/pipelines.h over the internal pipelines: parse the public options (strings
// become enums here, once), call the one pipeline function, and return its report.
#include <optional>

#include "pipelines/diagnose/diagnose.h"
#include "analysis/float_layers.h"
#include "analysis/layer_analysis.h"
#include "analysis/metrics.h"
#include "common/check.h"
#include "formats/trt_cache.h"
#include "passes/apply_plan.h"
#include "pipelines/calibrate.h"
#include "pipelines/convert.h"
#include "pipelines/evaluate.h"
#include "pipelines/fallback.h"
#include "pipelines/plan_evaluation.h"
#include "api/internal.h"
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
  if (o.loaded_plan.valid())
    return pipelines::OpenPlanEvaluation(eval, o.loaded_plan.impl().plan, o.placement);
  return pipelines::OpenPlanEvaluation(eval, o.plan, o.placement);
}

// The one conversion of the public calibrate options; every error here comes before any compute.
Result<pipelines::CalibrateOptions> ToCalibrateOptions(const CalibrateOptions& o) {
  pipelines::CalibrateOptions c;
  c.model = o.model;
  c.data = o.data;
  QK_ASSIGN_OR_RETURN(c.image, api::ToImageOptions(o.data_options.image));
  c.samples = o.data_options.samples;
  c.batch_size = o.data_options.batch_size;
  QK_RETURN_IF_NOT(o.run_batch >= 0, StatusCode::kInvalidArgument, "run_batch must be >= 0, got {}",
                   o.run_batch);
  if (o.run_batch > 0) c.run_batch = o.run_batch;
  QK_ASSIGN_OR_RETURN(pipelines::MethodChoice methods, api::ToMethodChoice(o.methods));
  c.method = methods.method;
  c.method_overrides = std::move(methods.overrides);
  c.placement = api::ToPlacementOptions(o.placement);
  c.output_dir = o.output_dir;
  c.stats_out = o.stats_out;
  QK_ASSIGN_OR_RETURN(c.cache, api::ToTrtCacheOptions(o.cache));
  c.progress = o.progress;
  QK_RETURN_IF_NOT(o.check_samples >= -1, StatusCode::kInvalidArgument,
                   "check_samples must be -1 (automatic), 0 (no check) or a count, got {}", o.check_samples);
  c.check.samples = o.check_samples;
  c.check.holdout = o.check_holdout;
  // Read only, and `o` outlives the call that uses `c`.
  if (o.statistics.valid()) c.statistics = &o.statistics.impl().statistics;
  return c;
}

}  // namespace

Status CheckCalibrateOptions(const CalibrateOptions& options) {
  return ToCalibrateOptions(options).status();
}

Result<CalibrateReport> Calibrate(const CalibrateOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::CalibrateOptions c, ToCalibrateOptions(options));
  QK_ASSIGN_OR_RETURN(pipelines::CalibrateResult r, pipelines::Calibrate(c));
  CalibrateReport report;
  report.plan = api::MakePublicPlan(std::move(r.plan));
  report.written = std::move(r.written);
  report.warnings = std::move(r.warnings);
  report.notes = std::move(r.notes);
  report.summary = std::move(r.summary);
  report.samples = r.samples;
  report.seconds = r.seconds;
  report.peak_rss_bytes = r.peak_rss_bytes;
  const pipelines::CheckResult& check = r.check;
  report.check = {check.ran,  check.data, check.origin,  check.samples, check.agreement,
                  check.top1, check.fp32_top1, check.rel_mse, check.seconds, check.warning};
  return report;
}

Result<EvaluateReport> Evaluate(const EvaluateOptions& options) {
  pipelines::EvalOptions eval;
  eval.model = options.model;
  eval.data = options.data;
  QK_ASSIGN_OR_RETURN(eval.image, api::ToImageOptions(options.image));
  eval.reference_model = options.reference_model;
  eval.plan = options.plan;
  if (options.loaded_plan.valid()) eval.loaded_plan = options.loaded_plan.impl().plan;
  QK_ASSIGN_OR_RETURN(eval.simulation.mode, passes::ParsePlacementPolicy(options.placement));
  eval.samples = options.samples;
  eval.batch_size = options.batch_size;
  eval.progress = options.progress;
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
  report.text = pipelines::FormatEval(eval, r);
  return report;
}

Result<AnalyzeReport> Analyze(const AnalyzeOptions& options) {
  QK_RETURN_IF_NOT(options.layers == "int8" || options.layers == "float" || options.layers == "both",
                   StatusCode::kInvalidArgument, "layers '{}': expected int8, float or both", options.layers);
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation opened, Open(options.evaluation));
  QK_ASSIGN_OR_RETURN(auto owned, pipelines::AnalyzeMetrics(options.evaluation.metrics, *opened.evaluator));
  const std::vector<analysis::Metric*> metrics = analysis::MetricPointers(owned);
  AnalyzeReport report;
  std::optional<analysis::AnalyzeResult> int8;
  std::optional<analysis::FloatLayersResult> floats;
  if (options.layers != "float") {
    analysis::AnalyzeOptions analyze;
    analyze.accumulated = options.accumulated;
    analyze.progress = options.progress;
    QK_ASSIGN_OR_RETURN(int8, analysis::AnalyzeLayers(*opened.evaluator, opened.plan, metrics, analyze));
    for (const analysis::LayerRow& row : int8->rows) report.ranked_tensors.push_back(row.tensor);
  }
  if (options.layers != "int8") {
    analysis::FloatLayersOptions check;
    check.progress = options.progress;
    QK_ASSIGN_OR_RETURN(floats, analysis::AnalyzeFloatLayers(*opened.evaluator, opened.plan, metrics, check));
    report.keep_fp32 = floats->keep_fp32;
  }
  report.warnings = opened.warnings;
  report.text = analysis::FormatAnalyzeReport(int8 ? &*int8 : nullptr, floats ? &*floats : nullptr, 0);
  report.json = analysis::AnalyzeReportJson(int8 ? &*int8 : nullptr, floats ? &*floats : nullptr);
  return report;
}

Result<FallbackReport> Fallback(const FallbackOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation opened, Open(options.evaluation));
  QK_RETURN_IF_NOT(options.evaluation.metrics.size() <= 1, StatusCode::kInvalidArgument,
                   "fallback searches on one metric, got {}", options.evaluation.metrics.size());
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric,
                      pipelines::FallbackMetric(options.evaluation.metrics.empty() ? "" : options.evaluation.metrics.front(),
                                                *opened.evaluator));
  pipelines::FallbackOptions fallback;
  fallback.budget = options.budget;
  fallback.max_float_layers = options.max_float_layers;
  fallback.output_dir = options.output_dir;
  QK_ASSIGN_OR_RETURN(pipelines::FallbackResult r,
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
  report.text = pipelines::FormatFallback(r);
  report.json = pipelines::FallbackJson(r);
  return report;
}

Result<DiagnoseReport> Diagnose(const DiagnoseOptions& options) {
  pipelines::DiagnoseOptions d;
  d.model = options.model;
  d.data = options.data;
  d.reference_data = options.reference_data;
  d.samples = options.samples;
  d.reference_samples = options.reference_samples;
  d.batch_size = options.batch_size;
  QK_ASSIGN_OR_RETURN(d.method, quant::ParseMethod(options.method));
  d.output_dir = options.output_dir;
  d.progress = options.progress;
  QK_ASSIGN_OR_RETURN(pipelines::DiagnoseResult r, pipelines::Diagnose(d));
  DiagnoseReport report;
  report.clean = r.clean;
  report.enough = r.enough;
  report.suggested_samples = r.suggested_samples;
  for (const pipelines::Finding& f : r.findings) report.findings.push_back(f.severity + ": " + f.message);
  report.written = r.written;
  report.text = pipelines::DiagnoseText(r);
  report.json = pipelines::DiagnoseJson(r);
  return report;
}

Result<ConvertReport> Convert(const ConvertOptions& options) {
  pipelines::ConvertOptions c;
  c.input = options.input;
  c.output = options.output;
  c.model = options.model;
  QK_ASSIGN_OR_RETURN(passes::PlacementPolicy policy, passes::ParsePlacementPolicy(options.placement));
  QK_RETURN_IF_NOT(policy != passes::PlacementPolicy::kAuto, StatusCode::kInvalidArgument,
                   "convert placement: use tensorrt or plan");
  c.placement_from_plan = policy == passes::PlacementPolicy::kPlan;
  c.qdq_output = options.qdq_output;
  QK_ASSIGN_OR_RETURN(c.cache.version, formats::ParseTrtVersion(options.trt_version));
  QK_ASSIGN_OR_RETURN(pipelines::ConvertResult r, pipelines::Convert(c));
  return ConvertReport{r.written, r.messages, r.layer_precisions, pipelines::ConvertResultJson(r)};
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
