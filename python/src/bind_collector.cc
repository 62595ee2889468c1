// quantkit._core.StatsCollector: one statistics pass fed batch by batch from Python (a
// DataLoader, an onnxruntime CalibrationDataReader) or from a CLI data spec, over the public
// quantkit::StatisticsCollector (quantkit/calibration.h): the CLI's checks and messages, model
// runs and statistics, whatever the Python batching. observe() reads the arrays with the GIL held
// (arrays.h: views, no copy where the layout allows) and releases it for the checks and the model
// runs; Python pulls the next batch only between runs.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "errors.h"
#include "interrupt.h"

namespace py = pybind11;

namespace quantkit::python {

void BindCollector(py::module_& m) {
  py::class_<StatisticsCollector>(m, "StatsCollector")
      .def(py::init([](const std::string& model, const std::vector<std::string>& exclude,
                       bool per_channel, int64_t expected_samples, bool progress,
                       int64_t run_batch) {
             CollectOptions options;
             options.expected_samples = expected_samples;
             options.progress = progress;
             options.run_batch = run_batch;
             return Unwrap(StatisticsCollector::Create(
                 Unwrap(LoadModel(model)), PlacementFrom(exclude, per_channel), options));
           }),
           py::arg("model"), py::arg("exclude"), py::arg("per_channel"),
           py::arg("expected_samples"), py::arg("progress"), py::arg("run_batch") = 0,
           "run_batch: samples per model run (0: the CLI's default).")
      .def(
          "observe",
          [](StatisticsCollector& c, const py::dict& batch) {
            const InputBatch arrays = BatchFromDict(batch, fmt::format("batch {}", c.batches()));
            ThrowIfError(CallInterruptible([&] { return c.Observe(arrays); }));
          },
          py::arg("batch"))
      .def(
          "observe_source",
          [](StatisticsCollector& c, const std::string& spec, int64_t samples, int64_t batch_size) {
            DataSpecOptions options;
            options.samples = samples;
            options.batch_size = batch_size;
            ThrowIfError(CallInterruptible([&] { return c.ObserveDataSpec(spec, options); }));
          },
          py::arg("spec"), py::arg("samples"), py::arg("batch_size"))
      .def(
          "finish",
          [](StatisticsCollector& c, const std::string& description) {
            return Unwrap(CallInterruptible([&] { return c.Finish(description); }));
          },
          py::arg("description"))
      .def(
          "conformed_pointers",
          [](const StatisticsCollector& c, const py::dict& batch) {
            const InputBatch conformed = Unwrap(c.Conform(BatchFromDict(batch, "batch")));
            std::vector<std::pair<std::string, uintptr_t>> out;
            for (const auto& [name, view] : conformed.inputs) {
              out.emplace_back(name, reinterpret_cast<uintptr_t>(view.data));
            }
            return out;
          },
          py::arg("batch"),
          "Data pointers of the tensors a batch becomes (tests: arrays are not copied).")
      .def_property_readonly("samples", &StatisticsCollector::samples)
      .def_property_readonly("run_batch", &StatisticsCollector::run_batch)
      .def_property_readonly("input_names", &StatisticsCollector::input_names);
}

}  // namespace quantkit::python
