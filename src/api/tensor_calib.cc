// quantkit::CalibrateTensorFile (include/quantkit/pipelines.h): the amax each calibration method
// gives one tensor read from .npy, as `quantkit tensor-calib` prints it.
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "common/check.h"
#include "data/npy.h"
#include "quant/calibrators/calibrators.h"
#include "quant/method.h"
#include "quant/tensor_calib.h"
#include "quantkit/pipelines.h"

namespace quantkit {
namespace {

static_assert(kDefaultTensorCalibBins == quant::kDefaultNumBins);
static_assert(kMinTensorCalibBins == quant::kMinNumBins &&
              kMaxTensorCalibBins == quant::kMaxNumBins);

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

}  // namespace

Result<TensorCalibReport> CalibrateTensorFile(const TensorCalibOptions& o) {
  QK_ASSIGN_OR_RETURN(std::vector<quant::MethodRequest> methods, ParseMethods(o.methods));
  QK_RETURN_IF_NOT(o.bins >= kMinTensorCalibBins && o.bins <= kMaxTensorCalibBins,
                   StatusCode::kInvalidArgument, "bins must be in [{}, {}], got {}",
                   kMinTensorCalibBins, kMaxTensorCalibBins, o.bins);
  QK_ASSIGN_OR_RETURN(ir::Tensor tensor, data::ReadNpy(o.file));
  auto values = data::ToFloat32(tensor);
  if (!values.ok()) return values.status().WithContext(o.file);
  quant::TensorCalibOptions opts;
  opts.methods = methods;
  opts.num_bins = o.bins;
  auto calibrated = quant::CalibrateTensor(quant::FloatSpan(*values), opts);
  if (!calibrated.ok()) return calibrated.status().WithContext(o.file);
  const quant::TensorCalibReport& report = *calibrated;
  const quant::RangeStats& r = report.range;
  const std::string dtype(ir::DTypeName(tensor.dtype()));
  TensorCalibReport out;
  for (const auto& m : report.results)
    out.methods.push_back({quant::MethodLabel(m.request), m.amax, m.index, m.trt_scale_hex});

  nlohmann::json j;
  j["file"] = o.file;
  j["dtype"] = dtype;
  j["shape"] = tensor.dims();
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
  out.json = j.dump(1) + "\n";

  std::string& t = out.text;
  t += fmt::format("tensor     {}  {} {}\n", o.file, dtype, ShapeText(tensor.dims()));
  t += fmt::format("elements   {} (NaN {}, +Inf {}, -Inf {}, zeros {})\n", r.count, r.nan_count,
                   r.posinf_count, r.neginf_count, r.zero_count);
  t += fmt::format("range      min {:.9g}  max {:.9g}  amax {:.9g}\n", r.min, r.max, r.amax);
  t += fmt::format("histogram  |x|, {} bins on [{:.9g}, {:.9g}], {} non-empty\n\n", report.num_bins,
                   report.hist_first_edge, report.hist_last_edge, report.nonempty_bins);
  t += fmt::format("{:<18} {:<16} {:<6} {}\n", "method", "amax", "bin", "trt scale (hex)");
  for (const auto& m : report.results) {
    t += fmt::format("{:<18} {:<16.9g} {:<6} {}\n", quant::MethodLabel(m.request), m.amax,
                     m.index < 0 ? "-" : std::to_string(m.index), m.trt_scale_hex);
  }
  return out;
}

}  // namespace quantkit
