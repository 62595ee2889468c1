// quantkit._core.StatsCollector and quantkit._core.Statistics (python/quantkit/stats.py wraps them).
#include <pybind11/stl.h>

#include "analysis/model_loading.h"
#include "errors.h"
#include "formats/qkstats.h"
#include "quant/method_amax.h"
#include "stats_collector.h"

namespace py = pybind11;

namespace quantkit::python {

passes::PlacementOptions PlacementFrom(const std::vector<std::string>& exclude, bool per_channel);

void BindStats(py::module_& m) {
  m.def("model_inputs", [](const std::string& model) {
    const ir::Model m = Unwrap(analysis::LoadModelForQuantization(model));
    std::vector<std::string> names;
    for (const data::InputSpec& in : data::ModelInputs(m)) names.push_back(in.name);
    return names;
  }, py::arg("model"), "Names of the inputs a data batch must feed.");

  py::class_<StatsCollector>(m, "StatsCollector")
      .def(py::init([](const std::string& model, const std::vector<std::string>& exclude,
                       bool per_channel, int64_t expected_samples, bool progress) {
             return std::make_unique<StatsCollector>(model, PlacementFrom(exclude, per_channel),
                                                     expected_samples, progress);
           }),
           py::arg("model"), py::arg("exclude"), py::arg("per_channel"), py::arg("expected_samples"),
           py::arg("progress"))
      .def("observe", &StatsCollector::Observe, py::arg("batch"))
      .def("observe_source",
           [](StatsCollector& c, const std::string& spec, int64_t samples, int64_t batch_size) {
             c.ObserveSource(spec, {}, samples, batch_size);
           },
           py::arg("spec"), py::arg("samples"), py::arg("batch_size"))
      .def("finish", &StatsCollector::Finish, py::arg("description"))
      .def("conformed_pointers", &StatsCollector::ConformedPointers, py::arg("batch"))
      .def_property_readonly("samples", &StatsCollector::samples)
      .def_property_readonly("input_names", &StatsCollector::input_names);

  py::class_<pipelines::Statistics>(m, "Statistics")
      .def_static("load",
                  [](const std::vector<std::string>& paths, const std::string& model_sha256) {
                    pipelines::Statistics s;
                    s.stats = Unwrap(formats::MergeStatsFiles(paths, model_sha256));
                    s.data_description = "statistics from";
                    for (const std::string& p : paths) s.data_description += " " + p;
                    s.data_fingerprint = "qkstats";
                    return s;
                  },
                  py::arg("paths"), py::arg("model_sha256") = "")
      .def("save", [](const pipelines::Statistics& s, const std::string& path) {
             ThrowIfError(formats::WriteStatsFile(path, s.stats));
           }, py::arg("path"))
      .def("merged", [](const pipelines::Statistics& a, const pipelines::Statistics& b) {
             pipelines::Statistics out = a;
             ThrowIfError(formats::MergeStats(&out.stats, b.stats));
             out.samples = a.samples + b.samples;
             out.data_description = a.data_description + " + " + b.data_description;
             out.data_fingerprint = a.data_fingerprint + "+" + b.data_fingerprint;
             return out;
           }, py::arg("other"))
      .def("amax", [](const pipelines::Statistics& s, const std::string& method) {
             const quant::MethodRequest request = Unwrap(quant::ParseMethod(method));
             std::map<std::string, float> out;
             py::gil_scoped_release release;
             for (const auto& [name, collector] : s.stats.tensors) {
               out[name] = Unwrap(quant::AmaxFromCollector(collector, request)).amax;
             }
             return out;
           }, py::arg("method"))
      .def("range", [](const pipelines::Statistics& s, const std::string& tensor) {
             auto it = s.stats.tensors.find(tensor);
             if (it == s.stats.tensors.end()) {
               throw StatusError(Status(StatusCode::kNotFound, "no statistics for tensor '" + tensor + "'"));
             }
             const quant::RangeStats& r = it->second.range();
             py::dict d;
             d["min"] = r.min;
             d["max"] = r.max;
             d["amax"] = r.amax;
             d["count"] = r.count;
             d["nan"] = r.nan_count;
             d["inf"] = r.posinf_count + r.neginf_count;
             return d;
           }, py::arg("tensor"))
      .def_property_readonly("tensors", [](const pipelines::Statistics& s) {
             std::vector<std::string> names;
             for (const auto& [name, c] : s.stats.tensors) names.push_back(name);
             return names;
           })
      .def_property_readonly("model_sha256", [](const pipelines::Statistics& s) { return s.stats.model_sha256; })
      .def_readonly("samples", &pipelines::Statistics::samples)
      .def_readonly("description", &pipelines::Statistics::data_description)
      .def_readonly("fingerprint", &pipelines::Statistics::data_fingerprint);
}

}  // namespace quantkit::python
