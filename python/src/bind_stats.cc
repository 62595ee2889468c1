// quantkit._core.Statistics: quantkit::Statistics (python/quantkit/stats.py wraps it).
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "quantkit/calibration.h"

namespace py = pybind11;

namespace quantkit::python {

void BindStats(py::module_& m) {
  py::class_<Statistics>(m, "Statistics")
      .def_static(
          "load",
          [](const std::vector<std::string>& paths, const std::string& model_sha256) {
            return Unwrap(Statistics::Load(paths, model_sha256));
          },
          py::arg("paths"), py::arg("model_sha256") = "")
      .def(
          "save", [](const Statistics& s, const std::string& path) { ThrowIfError(s.Save(path)); },
          py::arg("path"))
      .def(
          "merged", [](const Statistics& a, const Statistics& b) { return Unwrap(a.Merge(b)); },
          py::arg("other"))
      .def(
          "amax",
          [](const Statistics& s, const std::string& method) { return Unwrap(s.Amax(method)); },
          py::arg("method"), py::call_guard<py::gil_scoped_release>())
      .def(
          "range",
          [](const Statistics& s, const std::string& tensor) {
            const TensorRange r = Unwrap(s.Range(tensor));
            py::dict d;
            d["min"] = r.min;
            d["max"] = r.max;
            d["amax"] = r.amax;
            d["count"] = r.count;
            d["nan"] = r.nan_count;
            d["inf"] = r.inf_count;
            return d;
          },
          py::arg("tensor"))
      .def_property_readonly("tensors", &Statistics::tensors)
      .def_property_readonly("model_sha256", &Statistics::model_sha256)
      .def_property_readonly("samples", &Statistics::samples)
      .def_property_readonly("description", &Statistics::data_description)
      .def_property_readonly("fingerprint", &Statistics::data_fingerprint);
}

}  // namespace quantkit::python
