// include/quantkit/pipelines.h (and Calibrate of calibration.h) over the internal pipelines: each
// public options struct converted once (strings become enums and parsed values here), one
// pipeline call, its result converted back. The workflows themselves, reports included, are the
// pipelines' (pipelines/calibration_run.h, evaluate.h, analyze.h, fallback.h, diagnose/, ...).
#include "quantkit/pipelines.h"

#include "analysis/metrics.h"
#include "api/internal.h"
#include "common/check.h"
#include "passes/apply_plan.h"
#include "pipelines/analyze.h"
#include "pipelines/calibration_run.h"
#include "pipelines/convert.h"
#include "pipelines/diagnose/diagnose.h"
#include "pipelines/evaluate.h"
#include "pipelines/fallback.h"
#include "pipelines/run_model.h"
#include "quant/method.h"

namespace quantkit {
namespace {

Result<pipelines::PlanEvaluationRequest> ToPlanEvaluation(const PlanEvaluationOptions& o) {
  pipelines::PlanEvaluationRequest r;
  r.eval.model = o.model;
  r.eval.data = o.data;
  r.eval.samples = o.samples;
  r.eval.batch_size = o.batch_size;
  r.plan = o.plan;
  if (o.loaded_plan.valid()) r.loaded_plan = o.loaded_plan.impl().plan;
  r.placement = o.placement;
  QK_ASSIGN_OR_RETURN(r.distributed, api::ToDistributedOptions(o.distributed));
  return r;
}

// The one conversion of the public calibrate options; every error here comes before any compute.
Result<pipelines::CalibrationRequest> ToCalibrationRequest(const CalibrateOptions& o) {
  pipelines::CalibrationRequest r;
  pipelines::CalibrateOptions& c = r.calibrate;
  c.model = o.model;
  c.data = o.data;
  QK_ASSIGN_OR_RETURN(c.image, api::ToImageOptions(o.data_options.image));
  c.samples = o.data_options.samples;
  c.batch_size = o.data_options.batch_size;
  QK_RETURN_IF_NOT(o.run_batch >= 0, StatusCode::kInvalidArgument, "run_batch must be >= 0, got {}",
                   o.run_batch);
  if (o.run_batch > 0) c.run_batch = o.run_batch;
  // Method names parsed now ("auto" is RunCalibration's choice among them).
  r.method = o.methods.method;
  MethodChoices methods = o.methods;
  if (methods.method == "auto") methods.method = "max";
  QK_ASSIGN_OR_RETURN(pipelines::MethodChoice choice, api::ToMethodChoice(methods));
  c.method = choice.method;
  c.method_overrides = std::move(choice.overrides);
  c.placement = api::ToPlacementOptions(o.placement);
  c.output_dir = o.output_dir;
  c.stats_out = o.stats_out;
  c.from_stats = o.from_stats;
  QK_ASSIGN_OR_RETURN(c.cache, api::ToTrtCacheOptions(o.cache));
  c.progress = o.progress;
  // Read only, and `o` outlives the call that uses `c`.
  if (o.statistics.valid()) c.statistics = &o.statistics.impl().statistics;
  QK_ASSIGN_OR_RETURN(c.distributed, api::ToDistributedOptions(o.distributed));
  QK_ASSIGN_OR_RETURN(c.floats, api::ToFloatOptions(o.floats));
  QK_ASSIGN_OR_RETURN(c.weight_storage, api::ToWeightStorage(o.floats));
  c.int8 = o.int8;
  QK_ASSIGN_OR_RETURN(c.ptq, api::ToPtqOptions(o.ptq, o.progress));
  r.compare_methods = o.compare_methods;
  r.budget = o.budget;
  r.holdout = o.holdout.data;
  r.holdout_samples = o.holdout.samples;
  r.metric = o.holdout.metric;
  return r;
}

}  // namespace

Status CheckCalibrateOptions(const CalibrateOptions& options) {
  return ToCalibrationRequest(options).status();
}

Result<CalibrateReport> Calibrate(const CalibrateOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::CalibrationRequest request, ToCalibrationRequest(options));
  QK_ASSIGN_OR_RETURN(pipelines::CalibrationRun run, pipelines::RunCalibration(std::move(request)));
  pipelines::CalibrateResult& r = run.result;
  CalibrateReport report;
  report.plan =
      api::MakePublicPlan(run.repaired_plan ? std::move(*run.repaired_plan) : std::move(r.plan));
  report.written = std::move(run.written);
  report.warnings = std::move(r.warnings);
  report.notes = std::move(r.notes);
  report.summary = std::move(r.summary);
  report.samples = r.samples;
  report.seconds = r.seconds;
  report.peak_rss_bytes = r.peak_rss_bytes;
  report.within_budget = run.within_budget;
  report.text = std::move(run.text);
  report.json = std::move(run.json);
  report.rank = api::ToRankSummary(run.rank);
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
  QK_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<analysis::Metric>> metrics,
                      analysis::MakeMetrics(options.metrics));
  eval.metrics = analysis::MetricPointers(metrics);
  eval.samples = options.samples;
  eval.batch_size = options.batch_size;
  eval.progress = options.progress;
  eval.save_predictions = options.save_predictions;
  eval.save_outputs = options.save_outputs;
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
  report.text = pipelines::FormatEval(eval, r);
  report.json = pipelines::EvalJson(eval, r);
  report.rank = api::ToRankSummary(r.rank);
  return report;
}

Result<AnalyzeReport> Analyze(const AnalyzeOptions& options) {
  pipelines::AnalyzeRequest request;
  QK_ASSIGN_OR_RETURN(request.evaluation, ToPlanEvaluation(options.evaluation));
  request.metrics = options.evaluation.metrics;
  request.accumulated = options.accumulated;
  request.progress = options.progress;
  QK_RETURN_IF_NOT(options.top >= 0, StatusCode::kInvalidArgument, "top must be >= 0, got {}",
                   options.top);
  request.top = static_cast<size_t>(options.top);
  QK_ASSIGN_OR_RETURN(pipelines::AnalyzeRun run, pipelines::Analyze(request));
  AnalyzeReport report;
  for (const analysis::LayerRow& row : run.result.rows) report.ranked_tensors.push_back(row.tensor);
  report.warnings = std::move(run.warnings);
  report.text = std::move(run.text);
  report.json = std::move(run.json);
  report.rank = api::ToRankSummary(run.rank);
  return report;
}

Result<FallbackReport> Fallback(const FallbackOptions& options) {
  pipelines::FallbackRequest request;
  QK_ASSIGN_OR_RETURN(request.evaluation, ToPlanEvaluation(options.evaluation));
  QK_RETURN_IF_NOT(options.evaluation.metrics.size() <= 1, StatusCode::kInvalidArgument,
                   "fallback searches on one metric, got {}", options.evaluation.metrics.size());
  if (!options.evaluation.metrics.empty()) request.metric = options.evaluation.metrics.front();
  QK_RETURN_IF_NOT(options.trial_cache_bytes >= 0, StatusCode::kInvalidArgument,
                   "the trial cache must be >= 0 bytes, got {}", options.trial_cache_bytes);
  pipelines::FallbackOptions& f = request.fallback;
  f.budget = options.budget;
  f.max_float_layers = options.max_float_layers;
  f.output_dir = options.output_dir;
  f.float_precision = options.float_precision;
  f.trial_cache_bytes = options.trial_cache_bytes;
  f.progress = options.progress;
  QK_ASSIGN_OR_RETURN(f.floats, api::ToFloatOverride(options.floats));
  QK_ASSIGN_OR_RETURN(f.weight_storage, api::ToWeightStorage(options.floats));
  QK_ASSIGN_OR_RETURN(pipelines::FallbackRun run, pipelines::Fallback(request));
  const pipelines::FallbackResult& r = run.result;
  FallbackReport report;
  report.plan = api::MakePublicPlan(r.plan);
  report.float_layers.assign(r.search.float_layers.begin(), r.search.float_layers.end());
  report.fp32_value = r.fp32_value;
  report.int8_value = r.int8_value;
  report.final_value = r.final_value;
  report.within_budget = r.search.within_budget;
  report.layer_precisions = r.layer_precisions;
  report.written = r.written;
  report.warnings = std::move(run.warnings);
  report.text = std::move(run.text);
  report.json = std::move(run.json);
  report.rank = api::ToRankSummary(run.rank);
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
  d.chunks = options.chunks;
  d.bootstrap = options.bootstrap;
  d.subsets = options.subsets;
  d.seed = options.seed;
  d.ci_tolerance = options.ci_tolerance;
  d.cv_tolerance = options.cv_tolerance;
  d.batch_check_samples = options.batch_check_samples;
  if (!options.expect.empty()) {
    QK_ASSIGN_OR_RETURN(d.expect, pipelines::ParseExpectation(options.expect));
  }
  d.placement = api::ToPlacementOptions(options.placement);
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
  report.text = r.summary;
  for (const std::string& f : r.written) report.text += "wrote " + f + "\n";
  report.json = pipelines::DiagnoseJson(r);
  report.rank = api::ToRankSummary(r.rank);
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
  QK_ASSIGN_OR_RETURN(c.cache, api::ToTrtCacheOptions({options.trt_version, options.calibrator}));
  QK_RETURN_IF_NOT(options.float_precision == "fp16" || options.float_precision == "fp32",
                   StatusCode::kInvalidArgument, "float precision must be fp16 or fp32, got '{}'",
                   options.float_precision);
  c.float_precision = options.float_precision;
  QK_ASSIGN_OR_RETURN(c.floats, api::ToFloatOverride(options.floats));
  QK_ASSIGN_OR_RETURN(c.weight_storage, api::ToWeightStorage(options.floats));
  c.data = options.data;
  QK_ASSIGN_OR_RETURN(c.image, api::ToImageOptions(options.image));
  c.samples = options.samples;
  c.batch_size = options.batch_size;
  QK_ASSIGN_OR_RETURN(pipelines::ConvertResult r, pipelines::Convert(c));
  ConvertReport report;
  report.written = r.written;
  report.messages = r.messages;
  report.layer_precisions = r.layer_precisions;
  report.text = pipelines::FormatConvert(r, options.layer_precisions);
  report.json = pipelines::ConvertResultJson(r);
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
    report.text += s.ToString() + "\n";
  }
  return report;
}

}  // namespace quantkit
