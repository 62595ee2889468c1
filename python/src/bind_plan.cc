// quantkit._core.Plan: a quantkit::Plan (the hub: every artifact is written from one). The plan's
// contents are immutable and shared; the methods that change a Python Plan (keep_float,
// set_activation_amax) give the bound object a changed copy, so other holders are unaffected.
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "interrupt.h"
#include "quantkit/calibration.h"

namespace py = pybind11;

namespace quantkit::python {
namespace {

py::dict TensorDict(const TensorScale& t) {
  py::dict d;
  d["quantized"] = t.quantized;
  d["role"] = t.role;
  d["dtype"] = t.dtype;
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
  py::class_<Plan>(m, "Plan")
      .def(py::init([] { return Plan::Empty(); }))
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            return Unwrap(Plan::FromJson(text, source));
          },
          py::arg("text"), py::arg("source") = "<json>")
      .def_static(
          "load", [](const std::string& path) { return Unwrap(Plan::Read(path)); }, py::arg("path"),
          py::call_guard<py::gil_scoped_release>())
      .def("to_json", &Plan::ToJson)
      .def(
          "save",
          [](const Plan& p, const std::string& path) {
            ThrowIfError(p.Write(path, PlanFormat::kJson));
          },
          py::arg("path"))
      .def(
          "cache_text",
          [](const Plan& p, const std::string& trt_version, const std::string& calibrator) {
            return Unwrap(p.CacheText({trt_version, calibrator}));
          },
          py::arg("trt_version"), py::arg("calibrator"))
      .def(
          "write_cache",
          [](const Plan& p, const std::string& path, const std::string& trt_version,
             const std::string& calibrator) {
            ThrowIfError(p.Write(path, PlanFormat::kTrtCache, {trt_version, calibrator}));
          },
          py::arg("path"), py::arg("trt_version"), py::arg("calibrator"))
      .def(
          "write_ranges",
          [](const Plan& p, const std::string& path) {
            ThrowIfError(p.Write(path, PlanFormat::kRangesText));
          },
          py::arg("path"))
      .def(
          "write_qdq",
          [](const Plan& p, const std::string& model, const std::string& path, bool per_channel) {
            const Placement placement = PlacementFrom({}, per_channel);
            const Artifacts a = Unwrap(CallInterruptible([&]() -> Result<Artifacts> {
              const Result<Model> loaded = LoadModel(model);
              if (!loaded.ok()) return loaded.status();
              return WriteQdqModel(loaded.value(), p, path, placement);
            }));
            return std::make_pair(a.activation_pairs, a.weight_pairs);
          },
          py::arg("model"), py::arg("path"), py::arg("per_channel"))
      .def(
          "tensor",
          [](const Plan& p, const std::string& name) {
            const std::optional<TensorScale> t = p.Find(name);
            if (!t)
              throw StatusError(
                  Status(StatusCode::kNotFound, "the plan has no tensor '" + name + "'"));
            return TensorDict(*t);
          },
          py::arg("name"))
      .def_property_readonly("tensor_names",
                             [](const Plan& p) {
                               std::vector<std::string> names;
                               for (const TensorScale& t : p.tensors()) names.push_back(t.tensor);
                               return names;
                             })
      .def_property_readonly("float_nodes", &Plan::float_nodes)
      .def(
          "keep_float",
          [](Plan& p, const std::string& node, const std::string& reason) {
            p = p.WithFloatNodes({node}, reason);
          },
          py::arg("node"), py::arg("reason"))
      .def(
          "set_activation_amax",
          [](Plan& p, const std::string& tensor, float amax, const std::string& source) {
            p = Unwrap(p.WithActivationAmax(tensor, amax, source));
          },
          py::arg("tensor"), py::arg("amax"), py::arg("source") = "python")
      .def_property_readonly("num_quantized", &Plan::num_quantized);
}

}  // namespace quantkit::python
