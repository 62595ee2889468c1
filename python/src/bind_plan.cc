// quantkit._core.Plan: a quant::QuantPlan (the hub: every artifact is written from one).
#include <pybind11/stl.h>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "errors.h"
#include "formats/ranges.h"
#include "formats/trt_cache.h"
#include "onnx/export.h"
#include "quant/plan.h"

namespace py = pybind11;

namespace quantkit::python {

formats::TrtCacheWriteOptions CacheOptions(const std::string& trt_version, const std::string& calibrator) {
  return {Unwrap(formats::ParseTrtVersion(trt_version)), Unwrap(formats::ParseTrtCalibrator(calibrator))};
}

namespace {

py::dict TensorDict(const quant::TensorQuant& t) {
  py::dict d;
  d["quantized"] = t.quantized;
  d["role"] = quant::TensorRoleName(t.role);
  d["dtype"] = quant::QuantDTypeName(t.dtype);
  d["scale"] = t.scale;
  d["amax"] = t.amax;
  d["zero_point"] = t.zero_point;
  d["axis"] = t.axis;
  d["source"] = t.source;
  d["reason"] = t.reason;
  return d;
}

}  // namespace

void BindPlan(py::module_& m) {
  py::class_<quant::QuantPlan>(m, "Plan")
      .def(py::init<>())
      .def_static("from_json", [](const std::string& text, const std::string& source) {
             return Unwrap(formats::ParsePlanJson(text, source));
           }, py::arg("text"), py::arg("source") = "<json>")
      .def_static("load", [](const std::string& path) {
             py::gil_scoped_release release;
             return Unwrap(analysis::ReadPlanFile(path));
           }, py::arg("path"))
      .def("to_json", [](const quant::QuantPlan& p) { return formats::FormatPlanJson(p); })
      .def("save", [](const quant::QuantPlan& p, const std::string& path) {
             ThrowIfError(formats::WritePlanJson(path, p));
           }, py::arg("path"))
      .def("cache_text", [](const quant::QuantPlan& p, const std::string& trt_version,
                            const std::string& calibrator) {
             return formats::FormatTrtCache(p, CacheOptions(trt_version, calibrator));
           }, py::arg("trt_version"), py::arg("calibrator"))
      .def("write_cache", [](const quant::QuantPlan& p, const std::string& path,
                             const std::string& trt_version, const std::string& calibrator) {
             ThrowIfError(formats::WriteTrtCache(path, p, CacheOptions(trt_version, calibrator)));
           }, py::arg("path"), py::arg("trt_version"), py::arg("calibrator"))
      .def("write_ranges", [](const quant::QuantPlan& p, const std::string& path) {
             ThrowIfError(formats::WriteRangesText(path, p));
           }, py::arg("path"))
      .def("write_qdq", [](const quant::QuantPlan& p, const std::string& model, const std::string& path,
                           bool per_channel) {
             py::gil_scoped_release release;
             ir::Model m = Unwrap(analysis::LoadModelForQuantization(model));
             quant::QuantPlan plan = p;  // weight scales missing from the plan are filled on a copy
             analysis::SimulationOptions options;
             options.placement.per_channel_weights = per_channel;
             const passes::PassReport report = Unwrap(passes::RunPass(m, passes::ApplyPlan(&plan, options)));
             ThrowIfError(onnx_io::ExportModel(m, path));
             return std::make_pair(report.Count(passes::counter::kActivationPairs),
                                   report.Count(passes::counter::kWeightPairs));
           }, py::arg("model"), py::arg("path"), py::arg("per_channel"))
      .def("tensor", [](const quant::QuantPlan& p, const std::string& name) {
             const quant::TensorQuant* t = p.Find(name);
             if (!t) throw StatusError(Status(StatusCode::kNotFound, "the plan has no tensor '" + name + "'"));
             return TensorDict(*t);
           }, py::arg("name"))
      .def_property_readonly("tensor_names", [](const quant::QuantPlan& p) {
             std::vector<std::string> names;
             for (const auto& [name, t] : p.tensors) names.push_back(name);
             return names;
           })
      .def_readwrite("float_nodes", &quant::QuantPlan::float_nodes)
      .def("set_activation_amax", [](quant::QuantPlan& p, const std::string& tensor, float amax,
                                     const std::string& source) {
             p.SetActivationAmax(tensor, amax, source);
             ThrowIfError(quant::ValidatePlan(p));
           }, py::arg("tensor"), py::arg("amax"), py::arg("source") = "python")
      .def_property_readonly("num_quantized", &quant::QuantPlan::NumQuantized);
}

}  // namespace quantkit::python
