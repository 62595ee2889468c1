// The pipelines: calibrate, evaluate, analyze, fallback, diagnose. Each releases the GIL for the
// whole computation and returns plain values (a Plan, dicts, JSON text the Python side parses),
// so python/quantkit wraps them in typed result objects with to_dict().
//
// TODO(issue 14): these call the src/pipelines workflows through this thin facade; bind the
// include/quantkit public headers (CollectStatistics -> BuildPlan -> WriteArtifacts) once they land.
#include <pybind11/stl.h>

#include "analysis/diagnose/diagnose.h"
#include "analysis/layer_analysis.h"
#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "analysis/simulate.h"
#include "errors.h"
#include "pipelines/calibrate.h"
#include "pipelines/evaluate.h"
#include "pipelines/fallback.h"
#include "pipelines/plan_evaluation.h"
#include "quant/method_amax.h"

namespace py = pybind11;

namespace quantkit::python {

formats::TrtCacheWriteOptions CacheOptions(const std::string& trt_version, const std::string& calibrator);

passes::PlacementOptions PlacementFrom(const std::vector<std::string>& exclude, bool per_channel) {
  passes::PlacementOptions p;
  // As the CLI's --exclude: a name is a node name or an op type; both sets are applied.
  for (const std::string& e : exclude) {
    p.exclude_nodes.insert(e);
    p.exclude_op_types.insert(e);
  }
  p.per_channel_weights = per_channel;
  return p;
}

namespace {

struct CalibrateArgs {
  std::string model, data, method, output_dir, stats_out, trt_version, calibrator;
  std::map<std::string, std::string> overrides;
  std::vector<std::string> exclude;
  bool per_channel = true, progress = true;
  int64_t samples = 0, batch_size = 32;
};

// Options as the CLI reads them; every error here comes before any compute.
pipelines::CalibrateOptions ToOptions(const CalibrateArgs& a) {
  pipelines::CalibrateOptions c;
  c.model = a.model;
  c.data = a.data;
  c.samples = a.samples;
  c.batch_size = a.batch_size;
  c.method = Unwrap(quant::ParseMethod(a.method));
  for (const auto& [name, method] : a.overrides) c.method_overrides[name] = Unwrap(quant::ParseMethod(method));
  c.placement = PlacementFrom(a.exclude, a.per_channel);
  c.output_dir = a.output_dir;
  c.stats_out = a.stats_out;
  c.cache = CacheOptions(a.trt_version, a.calibrator);
  c.progress = a.progress;
  return c;
}

py::tuple CalibrateImpl(const CalibrateArgs& a, const pipelines::Statistics* stats) {
  pipelines::CalibrateOptions c = ToOptions(a);
  c.statistics = stats;  // read only; the Python object outlives the call
  Result<pipelines::CalibrateResult> r = [&] {
    py::gil_scoped_release release;
    return pipelines::Calibrate(c);
  }();
  pipelines::CalibrateResult result = Unwrap(std::move(r));
  py::dict info;
  info["written"] = result.written;
  info["warnings"] = result.warnings;
  info["summary"] = result.summary;
  info["samples"] = result.samples;
  info["seconds"] = result.seconds;
  info["peak_rss_bytes"] = result.peak_rss_bytes;
  return py::make_tuple(std::move(result.plan), info);
}

std::vector<std::unique_ptr<analysis::Metric>> Metrics(std::vector<std::string> names,
                                                        const analysis::PlanEvaluator& evaluator) {
  return Unwrap(pipelines::AnalyzeMetrics(std::move(names), evaluator));  // as `quantkit analyze`
}

std::unique_ptr<analysis::PlanEvaluator> Evaluator(const std::string& model, const std::string& data,
                                                   int64_t samples, int64_t batch_size,
                                                   const std::string& placement) {
  analysis::PlanEvalOptions eval;
  eval.model = model;
  eval.data = data;
  eval.samples = samples;
  eval.batch_size = batch_size;
  eval.simulation.mode = Unwrap(passes::ParsePlacementPolicy(placement));
  return Unwrap(analysis::PlanEvaluator::Create(eval));
}

}  // namespace

void BindPipelines(py::module_& m) {
  py::class_<CalibrateArgs>(m, "CalibrateArgs")
      .def(py::init<>())
      .def_readwrite("model", &CalibrateArgs::model)
      .def_readwrite("data", &CalibrateArgs::data)
      .def_readwrite("method", &CalibrateArgs::method)
      .def_readwrite("overrides", &CalibrateArgs::overrides)
      .def_readwrite("exclude", &CalibrateArgs::exclude)
      .def_readwrite("per_channel", &CalibrateArgs::per_channel)
      .def_readwrite("output_dir", &CalibrateArgs::output_dir)
      .def_readwrite("stats_out", &CalibrateArgs::stats_out)
      .def_readwrite("trt_version", &CalibrateArgs::trt_version)
      .def_readwrite("calibrator", &CalibrateArgs::calibrator)
      .def_readwrite("samples", &CalibrateArgs::samples)
      .def_readwrite("batch_size", &CalibrateArgs::batch_size)
      .def_readwrite("progress", &CalibrateArgs::progress);

  m.def("check_calibrate_args", [](const CalibrateArgs& a) { ToOptions(a); }, py::arg("args"));
  m.def("calibrate", [](const CalibrateArgs& a) { return CalibrateImpl(a, nullptr); }, py::arg("args"));
  m.def("calibrate_from_stats", [](const CalibrateArgs& a, const pipelines::Statistics& stats) {
          return CalibrateImpl(a, &stats);
        }, py::arg("args"), py::arg("stats"));

  m.def("evaluate", [](const std::string& model, const std::string& data, const std::string& plan,
                       const std::string& reference, int64_t samples, int64_t batch_size, bool progress) {
          pipelines::EvalOptions o;
          o.model = model;
          o.data = data;
          o.plan = plan;
          o.reference_model = reference;
          o.samples = samples;
          o.batch_size = batch_size;
          o.progress = progress;
          Result<pipelines::EvalResult> r = [&] {
            py::gil_scoped_release release;
            return pipelines::Evaluate(o);
          }();
          const pipelines::EvalResult e = Unwrap(std::move(r));
          py::dict d;
          d["samples"] = e.samples;
          d["top1"] = e.top1 ? py::cast(*e.top1) : py::none();
          d["top5"] = e.top5 ? py::cast(*e.top5) : py::none();
          if (e.agreement) {
            py::dict a;
            a["argmax_agreement"] = e.agreement->argmax_agreement;
            a["cosine"] = e.agreement->cosine;
            a["sqnr_db"] = e.agreement->sqnr_db;
            a["max_abs_error"] = e.agreement->max_abs_error;
            d["agreement"] = a;
          } else {
            d["agreement"] = py::none();
          }
          d["metrics"] = e.metrics;
          d["seconds"] = e.seconds;
          d["report"] = pipelines::FormatEval(o, e);
          return d;
        }, py::arg("model"), py::arg("data"), py::arg("plan"), py::arg("reference"), py::arg("samples"),
        py::arg("batch_size"), py::arg("progress"));

  m.def("analyze", [](const std::string& model, const quant::QuantPlan& plan, const std::string& data,
                      const std::vector<std::string>& metric_names, int64_t samples, int64_t batch_size,
                      const std::string& placement, bool accumulated, bool progress) {
          py::gil_scoped_release release;
          auto evaluator = Evaluator(model, data, samples, batch_size, placement);
          auto metrics = Metrics(metric_names, *evaluator);
          analysis::AnalyzeOptions options;
          options.accumulated = accumulated;
          options.progress = progress;
          const analysis::AnalyzeResult r = Unwrap(
              analysis::AnalyzeLayers(*evaluator, plan, analysis::MetricPointers(metrics), options));
          return std::make_pair(analysis::AnalyzeJson(r), analysis::FormatAnalyzeTable(r, r.rows.size()));
        }, py::arg("model"), py::arg("plan"), py::arg("data"), py::arg("metrics"), py::arg("samples"),
        py::arg("batch_size"), py::arg("placement"), py::arg("accumulated"), py::arg("progress"));

  m.def("fallback", [](const std::string& model, const quant::QuantPlan& plan, const std::string& data,
                       const std::string& metric, double budget, int max_float_layers,
                       const std::string& output_dir, int64_t samples, int64_t batch_size,
                       const std::string& placement) {
          py::gil_scoped_release release;
          auto evaluator = Evaluator(model, data, samples, batch_size, placement);
          auto metric_ptr = Unwrap(pipelines::FallbackMetric(metric, *evaluator));
          pipelines::FallbackOptions options;
          options.budget = budget;
          options.max_float_layers = max_float_layers;
          options.output_dir = output_dir;
          pipelines::FallbackResult r =
              Unwrap(pipelines::RunFallback(*evaluator, plan, metric_ptr.get(), options));
          std::string json = pipelines::FallbackJson(r), text = pipelines::FormatFallback(r);
          return std::make_tuple(std::move(r.plan), json, text, r.written);
        }, py::arg("model"), py::arg("plan"), py::arg("data"), py::arg("metric"), py::arg("budget"),
        py::arg("max_float_layers"), py::arg("output_dir"), py::arg("samples"), py::arg("batch_size"),
        py::arg("placement"));

  m.def("diagnose", [](const std::string& model, const std::string& data, const std::string& reference,
                       const std::string& method, int64_t samples, int64_t batch_size,
                       const std::string& output_dir, bool progress) {
          analysis::DiagnoseOptions o;
          o.model = model;
          o.data = data;
          o.reference_data = reference;
          o.method = Unwrap(quant::ParseMethod(method));
          o.samples = samples;
          o.batch_size = batch_size;
          o.output_dir = output_dir;
          o.progress = progress;
          py::gil_scoped_release release;
          const analysis::DiagnoseResult r = Unwrap(analysis::Diagnose(o));
          return std::make_tuple(analysis::DiagnoseJson(r), analysis::DiagnoseText(r), r.clean);
        }, py::arg("model"), py::arg("data"), py::arg("reference"), py::arg("method"), py::arg("samples"),
        py::arg("batch_size"), py::arg("output_dir"), py::arg("progress"));
}

}  // namespace quantkit::python
