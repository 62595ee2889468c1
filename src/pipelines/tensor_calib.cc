#include "pipelines/tensor_calib.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "data/npy.h"
#include "quant/method.h"

namespace quantkit::pipelines {

namespace {

// Method names are parsed by quant::ParseMethod (the one vocabulary); "all" is this command's.
Result<std::vector<quant::MethodRequest>> ParseMethods(const std::vector<std::string>& names) {
  std::vector<quant::MethodRequest> out;
  for (const std::string& name : names) {
    if (name == "all") {
      const std::vector<quant::MethodRequest> all = quant::AllMethods();
      out.insert(out.end(), all.begin(), all.end());
      continue;
    }
    QK_ASSIGN_OR_RETURN(quant::MethodRequest r, quant::ParseMethod(name));
    out.push_back(r);
  }
  return out;
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "," : "") + std::to_string(dims[k]);
  return s + "]";
}

std::string Json(const TensorCalibRequest& o, const TensorCalibRun& run) {
  const quant::TensorCalibReport& report = run.report;
  const quant::RangeStats& r = report.range;
  nlohmann::json j;
  j["file"] = o.file;
  j["dtype"] = run.dtype;
  j["shape"] = run.shape;
  j["range"] = {{"count", r.count},
                {"nan", r.nan_count},
                {"posinf", r.posinf_count},
                {"neginf", r.neginf_count},
                {"zeros", r.zero_count},
                {"min", r.min},
                {"max", r.max},
                {"amax", r.amax}};
  j["histogram"] = {{"kind", "abs"},
                    {"bins", report.num_bins},
                    {"nonempty_bins", report.nonempty_bins},
                    {"first_edge", report.hist_first_edge},
                    {"last_edge", report.hist_last_edge}};
  j["methods"] = nlohmann::json::array();
  for (const auto& m : report.results) {
    j["methods"].push_back({{"method", quant::MethodLabel(m.request)},
                            {"amax", m.amax},
                            {"index", m.index},
                            {"trt_scale_hex", m.trt_scale_hex}});
  }
  return j.dump(1) + "\n";
}

std::string Text(const TensorCalibRequest& o, const TensorCalibRun& run) {
  const quant::TensorCalibReport& report = run.report;
  const quant::RangeStats& r = report.range;
  std::string s = fmt::format("tensor     {}  {} {}\n", o.file, run.dtype, ShapeText(run.shape));
  s += fmt::format("elements   {} (NaN {}, +Inf {}, -Inf {}, zeros {})\n", r.count, r.nan_count,
                   r.posinf_count, r.neginf_count, r.zero_count);
  s += fmt::format("range      min {:.9g}  max {:.9g}  amax {:.9g}\n", r.min, r.max, r.amax);
  s += fmt::format("histogram  |x|, {} bins on [{:.9g}, {:.9g}], {} non-empty\n\n", report.num_bins,
                   report.hist_first_edge, report.hist_last_edge, report.nonempty_bins);
  s += fmt::format("{:<18} {:<16} {:<6} {}\n", "method", "amax", "bin", "trt scale (hex)");
  for (const auto& m : report.results) {
    s += fmt::format("{:<18} {:<16.9g} {:<6} {}\n", quant::MethodLabel(m.request), m.amax,
                     m.index < 0 ? "-" : std::to_string(m.index), m.trt_scale_hex);
  }
  return s;
}

}  // namespace

Result<TensorCalibRun> TensorCalib(const TensorCalibRequest& o) {
  QK_ASSIGN_OR_RETURN(std::vector<quant::MethodRequest> methods, ParseMethods(o.methods));
  QK_ASSIGN_OR_RETURN(ir::Tensor tensor, data::ReadNpy(o.file));
  Result<std::vector<float>> values = data::ToFloat32(tensor);
  if (!values.ok()) return values.status().WithContext(o.file);
  quant::TensorCalibOptions opts;
  opts.methods = std::move(methods);
  opts.num_bins = o.bins;
  Result<quant::TensorCalibReport> report = quant::CalibrateTensor(quant::FloatSpan(*values), opts);
  if (!report.ok()) return report.status().WithContext(o.file);
  TensorCalibRun run;
  run.report = std::move(*report);
  run.dtype = std::string(ir::DTypeName(tensor.dtype()));
  run.shape = tensor.dims();
  run.text = Text(o, run);
  run.json = Json(o, run);
  return run;
}

}  // namespace quantkit::pipelines
