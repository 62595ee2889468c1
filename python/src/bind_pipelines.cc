// The workflows: calibrate, evaluate, analyze, fallback, diagnose, qat, over include/quantkit. The
// public option structs are bound field by field (python/quantkit/pipelines.py fills them), so
// each option is converted to its internal form once, by the public API
// (src/api/internal.h); the reports come back as bound structs that the Python side
// wraps in typed results with to_dict(). Every workflow releases the GIL for its whole run.
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "interrupt.h"
#include "quantkit/calibration.h"
#include "quantkit/pipelines.h"
#include "quantkit/qat.h"

namespace py = pybind11;

namespace quantkit::python {

Placement PlacementFrom(const std::vector<std::string>& exclude, bool per_channel) {
  Placement p;
  for (const std::string& name : exclude) p.Exclude(name);
  p.per_channel_weights = per_channel;
  return p;
}

namespace {

// A workflow bound as f(options) -> report, the GIL released while it runs; Ctrl-C stops it
// (interrupt.h).
template <typename Report, typename Options>
void DefWorkflow(py::module_& m, const char* name, Result<Report> (*workflow)(const Options&)) {
  m.def(
      name,
      [workflow](const Options& options) {
        return Unwrap(CallInterruptible([&] { return workflow(options); }));
      },
      py::arg("options"));
}

void BindOptions(py::module_& m) {
  py::class_<Placement>(m, "Placement")
      .def(py::init<>())
      .def_readwrite("per_channel_weights", &Placement::per_channel_weights)
      .def_readwrite("quantize_residual_add", &Placement::quantize_residual_add)
      .def_readwrite("exclude_nodes", &Placement::exclude_nodes)
      .def_readwrite("exclude_op_types", &Placement::exclude_op_types);
  py::class_<MethodChoices>(m, "MethodChoices")
      .def(py::init<>())
      .def_readwrite("method", &MethodChoices::method)
      .def_readwrite("overrides", &MethodChoices::overrides);
  py::class_<CacheOptions>(m, "CacheOptions")
      .def(py::init<>())
      .def_readwrite("trt_version", &CacheOptions::trt_version)
      .def_readwrite("calibrator", &CacheOptions::calibrator);
  py::class_<DataSpecOptions>(m, "DataSpecOptions")
      .def(py::init<>())
      .def_readwrite("batch_size", &DataSpecOptions::batch_size)
      .def_readwrite("samples", &DataSpecOptions::samples);
  py::class_<FloatPart>(m, "FloatPart")
      .def(py::init<>())
      .def_readwrite("dtype", &FloatPart::dtype)
      .def_readwrite("cast_io", &FloatPart::cast_io)
      .def_readwrite("keep_fp32", &FloatPart::keep_fp32)
      .def_readwrite("weight_storage", &FloatPart::weight_storage)
      .def_readwrite("int8", &FloatPart::int8);
  py::class_<PtqChoices>(m, "PtqChoices")
      .def(py::init<>())
      .def_readwrite("stages", &PtqChoices::stages)
      .def_readwrite("samples", &PtqChoices::samples)
      .def_readwrite("batch", &PtqChoices::batch)
      .def_readwrite("memory_mib", &PtqChoices::memory_mib)
      .def_readwrite("seed", &PtqChoices::seed);
  py::class_<QatOptions>(m, "QatOptions")
      .def(py::init<>())
      .def_readwrite("model", &QatOptions::model)
      .def_readwrite("data", &QatOptions::data)
      .def_readwrite("output_dir", &QatOptions::output_dir)
      .def_readwrite("labels", &QatOptions::labels)
      .def_readwrite("samples", &QatOptions::samples)
      .def_readwrite("plan", &QatOptions::plan)
      .def_readwrite("method", &QatOptions::method)
      .def_readwrite("calib_data", &QatOptions::calib_data)
      .def_readwrite("calib_samples", &QatOptions::calib_samples)
      .def_readwrite("weights", &QatOptions::weights)
      .def_readwrite("frozen_weight_scales", &QatOptions::frozen_weight_scales)
      .def_readwrite("learn_activation_scales", &QatOptions::learn_activation_scales)
      .def_readwrite("steps", &QatOptions::steps)
      .def_readwrite("epochs", &QatOptions::epochs)
      .def_readwrite("batch_size", &QatOptions::batch_size)
      .def_readwrite("lr", &QatOptions::lr)
      .def_readwrite("lr_auto", &QatOptions::lr_auto)
      .def_readwrite("teacher", &QatOptions::teacher)
      .def_readwrite("warmup_steps", &QatOptions::warmup_steps)
      .def_readwrite("optimizer", &QatOptions::optimizer)
      .def_readwrite("weight_decay", &QatOptions::weight_decay)
      .def_readwrite("loss", &QatOptions::loss)
      .def_readwrite("temperature", &QatOptions::temperature)
      .def_readwrite("features", &QatOptions::features)
      .def_readwrite("feature_weight", &QatOptions::feature_weight)
      .def_readwrite("seed", &QatOptions::seed)
      .def_readwrite("val", &QatOptions::val)
      .def_readwrite("val_samples", &QatOptions::val_samples)
      .def_readwrite("holdout", &QatOptions::holdout)
      .def_readwrite("metric", &QatOptions::metric)
      .def_readwrite("eval_every", &QatOptions::eval_every)
      .def_readwrite("resume", &QatOptions::resume)
      .def_readwrite("stop_after", &QatOptions::stop_after)
      .def_readwrite("floats", &QatOptions::floats)
      .def_readwrite("progress", &QatOptions::progress);
  py::class_<CalibrateOptions>(m, "CalibrateOptions")
      .def(py::init<>())
      .def_readwrite("model", &CalibrateOptions::model)
      .def_readwrite("data", &CalibrateOptions::data)
      .def_readwrite("statistics", &CalibrateOptions::statistics)
      .def_readwrite("data_options", &CalibrateOptions::data_options)
      .def_readwrite("run_batch", &CalibrateOptions::run_batch)
      .def_readwrite("methods", &CalibrateOptions::methods)
      .def_readwrite("placement", &CalibrateOptions::placement)
      .def_readwrite("output_dir", &CalibrateOptions::output_dir)
      .def_readwrite("stats_out", &CalibrateOptions::stats_out)
      .def_readwrite("cache", &CalibrateOptions::cache)
      .def_readwrite("progress", &CalibrateOptions::progress)
      .def_readwrite("check_samples", &CalibrateOptions::check_samples)
      .def_readwrite("holdout", &CalibrateOptions::holdout)
      .def_readwrite("holdout_samples", &CalibrateOptions::holdout_samples)
      .def_readwrite("compare_methods", &CalibrateOptions::compare_methods)
      .def_readwrite("budget", &CalibrateOptions::budget)
      .def_readwrite("metric", &CalibrateOptions::metric)
      .def_readwrite("floats", &CalibrateOptions::floats)
      .def_readwrite("ptq", &CalibrateOptions::ptq)
      .def_readwrite("repair", &CalibrateOptions::repair)
      .def_readwrite("repair_time_seconds", &CalibrateOptions::repair_time_seconds);
  py::class_<EvaluateOptions>(m, "EvaluateOptions")
      .def(py::init<>())
      .def_readwrite("model", &EvaluateOptions::model)
      .def_readwrite("data", &EvaluateOptions::data)
      .def_readwrite("reference_model", &EvaluateOptions::reference_model)
      .def_readwrite("plan", &EvaluateOptions::plan)
      .def_readwrite("loaded_plan", &EvaluateOptions::loaded_plan)
      .def_readwrite("placement", &EvaluateOptions::placement)
      .def_readwrite("samples", &EvaluateOptions::samples)
      .def_readwrite("batch_size", &EvaluateOptions::batch_size)
      .def_readwrite("progress", &EvaluateOptions::progress);
  py::class_<PlanEvaluationOptions>(m, "PlanEvaluationOptions")
      .def(py::init<>())
      .def_readwrite("model", &PlanEvaluationOptions::model)
      .def_readwrite("loaded_plan", &PlanEvaluationOptions::loaded_plan)
      .def_readwrite("data", &PlanEvaluationOptions::data)
      .def_readwrite("placement", &PlanEvaluationOptions::placement)
      .def_readwrite("samples", &PlanEvaluationOptions::samples)
      .def_readwrite("batch_size", &PlanEvaluationOptions::batch_size)
      .def_readwrite("metrics", &PlanEvaluationOptions::metrics);
  py::class_<AnalyzeOptions>(m, "AnalyzeOptions")
      .def(py::init<>())
      .def_readwrite("evaluation", &AnalyzeOptions::evaluation)
      .def_readwrite("accumulated", &AnalyzeOptions::accumulated)
      .def_readwrite("layers", &AnalyzeOptions::layers)
      .def_readwrite("progress", &AnalyzeOptions::progress);
  py::class_<FallbackOptions>(m, "FallbackOptions")
      .def(py::init<>())
      .def_readwrite("evaluation", &FallbackOptions::evaluation)
      .def_readwrite("budget", &FallbackOptions::budget)
      .def_readwrite("max_float_layers", &FallbackOptions::max_float_layers)
      .def_readwrite("output_dir", &FallbackOptions::output_dir);
  py::class_<DiagnoseOptions>(m, "DiagnoseOptions")
      .def(py::init<>())
      .def_readwrite("model", &DiagnoseOptions::model)
      .def_readwrite("data", &DiagnoseOptions::data)
      .def_readwrite("reference_data", &DiagnoseOptions::reference_data)
      .def_readwrite("samples", &DiagnoseOptions::samples)
      .def_readwrite("batch_size", &DiagnoseOptions::batch_size)
      .def_readwrite("method", &DiagnoseOptions::method)
      .def_readwrite("output_dir", &DiagnoseOptions::output_dir)
      .def_readwrite("progress", &DiagnoseOptions::progress);
}

void BindReports(py::module_& m) {
  py::class_<CalibrateCheck>(m, "CalibrateCheck")
      .def_readonly("ran", &CalibrateCheck::ran)
      .def_readonly("data", &CalibrateCheck::data)
      .def_readonly("origin", &CalibrateCheck::origin)
      .def_readonly("samples", &CalibrateCheck::samples)
      .def_readonly("agreement", &CalibrateCheck::agreement)
      .def_readonly("top1", &CalibrateCheck::top1)
      .def_readonly("fp32_top1", &CalibrateCheck::fp32_top1)
      .def_readonly("rel_mse", &CalibrateCheck::rel_mse)
      .def_readonly("seconds", &CalibrateCheck::seconds)
      .def_readonly("warning", &CalibrateCheck::warning);
  py::class_<CalibrateReport>(m, "CalibrateReport")
      .def_readonly("check", &CalibrateReport::check)
      .def_readonly("plan", &CalibrateReport::plan)
      .def_readonly("written", &CalibrateReport::written)
      .def_readonly("warnings", &CalibrateReport::warnings)
      .def_readonly("summary", &CalibrateReport::summary)
      .def_readonly("samples", &CalibrateReport::samples)
      .def_readonly("seconds", &CalibrateReport::seconds)
      .def_readonly("peak_rss_bytes", &CalibrateReport::peak_rss_bytes)
      .def_readonly("text", &CalibrateReport::text)
      .def_readonly("json", &CalibrateReport::json)
      .def_readonly("within_budget", &CalibrateReport::within_budget);
  py::class_<QatReport>(m, "QatReport")
      .def_readonly("summary", &QatReport::summary)
      .def_readonly("warnings", &QatReport::warnings)
      .def_readonly("written", &QatReport::written)
      .def_readonly("metric", &QatReport::metric)
      .def_readonly("val_ptq", &QatReport::val_ptq)
      .def_readonly("val_best", &QatReport::val_best)
      .def_readonly("best_step", &QatReport::best_step)
      .def_readonly("steps", &QatReport::steps)
      .def_readonly("lr", &QatReport::lr)
      .def_readonly("paused", &QatReport::paused)
      .def_readonly("seconds", &QatReport::seconds)
      .def_readonly("peak_rss_bytes", &QatReport::peak_rss_bytes)
      .def_readonly("footer", &QatReport::footer)
      .def_readonly("text", &QatReport::text);
  py::class_<EvaluateReport>(m, "EvaluateReport")
      .def_readonly("samples", &EvaluateReport::samples)
      .def_readonly("top1", &EvaluateReport::top1)
      .def_readonly("top5", &EvaluateReport::top5)
      .def_readonly("argmax_agreement", &EvaluateReport::argmax_agreement)
      .def_readonly("cosine", &EvaluateReport::cosine)
      .def_readonly("sqnr_db", &EvaluateReport::sqnr_db)
      .def_readonly("max_abs_error", &EvaluateReport::max_abs_error)
      .def_readonly("metrics", &EvaluateReport::metrics)
      .def_readonly("seconds", &EvaluateReport::seconds)
      .def_readonly("text", &EvaluateReport::text);
  py::class_<AnalyzeReport>(m, "AnalyzeReport")
      .def_readonly("json", &AnalyzeReport::json)
      .def_readonly("text", &AnalyzeReport::text);
  py::class_<FallbackReport>(m, "FallbackReport")
      .def_readonly("plan", &FallbackReport::plan)
      .def_readonly("written", &FallbackReport::written)
      .def_readonly("json", &FallbackReport::json)
      .def_readonly("text", &FallbackReport::text);
  py::class_<DiagnoseReport>(m, "DiagnoseReport")
      .def_readonly("clean", &DiagnoseReport::clean)
      .def_readonly("json", &DiagnoseReport::json)
      .def_readonly("text", &DiagnoseReport::text);
}

}  // namespace

void BindPipelines(py::module_& m) {
  BindOptions(m);
  BindReports(m);
  m.def("placement", &PlacementFrom, py::arg("exclude"), py::arg("per_channel"),
        "Excluded names (node names or op types, as the CLI's --exclude) and the weights' "
        "granularity.");
  m.def(
      "model_inputs", [](const std::string& model) { return Unwrap(ModelInputNames(model)); },
      py::arg("model"), "Names of the inputs a data batch must feed.",
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "check_calibrate_options",
      [](const CalibrateOptions& options) { ThrowIfError(CheckCalibrateOptions(options)); },
      py::arg("options"));
  DefWorkflow(m, "calibrate", &Calibrate);
  DefWorkflow(m, "evaluate", &Evaluate);
  DefWorkflow(m, "analyze", &Analyze);
  DefWorkflow(m, "fallback", &Fallback);
  DefWorkflow(m, "diagnose", &Diagnose);
  DefWorkflow(m, "qat", &Qat);
}

}  // namespace quantkit::python
