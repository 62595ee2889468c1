// quantkit._core.StatsCollector: one statistics pass fed batch by batch from Python
// (stats_collector.h). The one binding still on the internal path: the collector conforms
// numpy arrays to the model inputs with the data layer's own checks and messages (ir::Tensor
// views, arrays.h), which the public BatchStream does not offer yet. Its statistics leave here
// as the public quantkit::Statistics. scripts/check_layers.py allows internal headers in this
// file, stats_collector.* and arrays.* only.
// TODO(#14): collect through quantkit::CollectStatistics over a Python BatchStream once it
// reports the data layer's messages; then this file, stats_collector.* and arrays.* go.
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "pipelines/public_internal.h"
#include "stats_collector.h"

namespace py = pybind11;

namespace quantkit::python {

void BindCollector(py::module_& m) {
  py::class_<StatsCollector>(m, "StatsCollector")
      .def(py::init([](const std::string& model, const std::vector<std::string>& exclude,
                       bool per_channel, int64_t expected_samples, bool progress) {
             return std::make_unique<StatsCollector>(
                 model, pipelines::ToPlacementOptions(PlacementFrom(exclude, per_channel)),
                 expected_samples, progress);
           }),
           py::arg("model"), py::arg("exclude"), py::arg("per_channel"),
           py::arg("expected_samples"), py::arg("progress"))
      .def("observe", &StatsCollector::Observe, py::arg("batch"))
      .def(
          "observe_source",
          [](StatsCollector& c, const std::string& spec, int64_t samples, int64_t batch_size) {
            c.ObserveSource(spec, {}, samples, batch_size);
          },
          py::arg("spec"), py::arg("samples"), py::arg("batch_size"))
      .def(
          "finish",
          [](StatsCollector& c, const std::string& description) {
            return pipelines::MakePublicStatistics(c.Finish(description));
          },
          py::arg("description"))
      .def("conformed_pointers", &StatsCollector::ConformedPointers, py::arg("batch"))
      .def_property_readonly("samples", &StatsCollector::samples)
      .def_property_readonly("input_names", &StatsCollector::input_names);
}

}  // namespace quantkit::python
