// quantkit tensor-calib FILE.npy [--method max|entropy|percentile[:P]|mse|all] [--json]:
// the amax each calibration method gives for one tensor, plus a histogram summary. Methods run on
// the pytorch-quantization reference histogram (2048 |x| bins), so numbers match it.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "numeric_options.h"
#include "common/check.h"
#include "data/npy.h"
#include "quant/calibrators/calibrators.h"
#include "quant/method.h"
#include "quant/tensor_calib.h"

namespace quantkit::cli {
namespace {

struct TensorCalibCliOptions {
  std::string file;
  std::vector<std::string> methods = {"all"};
  bool json = false;
  int64_t bins = quant::kDefaultNumBins;
};

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

int RunTensorCalib(const TensorCalibCliOptions& o) {
  auto methods = ParseMethods(o.methods);
  if (!methods.ok()) return Report(methods.status());
  auto tensor = data::ReadNpy(o.file);
  if (!tensor.ok()) return Report(tensor.status());
  auto values = data::ToFloat32(*tensor);
  if (!values.ok()) return Report(values.status().WithContext(o.file));
  quant::TensorCalibOptions opts;
  opts.methods = *methods;
  opts.num_bins = o.bins;
  auto report = quant::CalibrateTensor(quant::FloatSpan(*values), opts);
  if (!report.ok()) return Report(report.status().WithContext(o.file));
  const quant::RangeStats& r = report->range;
  if (o.json) {
    nlohmann::json j;
    j["file"] = o.file;
    j["dtype"] = std::string(ir::DTypeName(tensor->dtype()));
    j["shape"] = tensor->dims();
    j["range"] = {{"count", r.count}, {"nan", r.nan_count}, {"posinf", r.posinf_count},
                  {"neginf", r.neginf_count}, {"zeros", r.zero_count}, {"min", r.min},
                  {"max", r.max}, {"amax", r.amax}};
    j["histogram"] = {{"kind", "abs"}, {"bins", report->num_bins},
                      {"nonempty_bins", report->nonempty_bins},
                      {"first_edge", report->hist_first_edge}, {"last_edge", report->hist_last_edge}};
    j["methods"] = nlohmann::json::array();
    for (const auto& m : report->results) {
      j["methods"].push_back({{"method", quant::MethodLabel(m.request)}, {"amax", m.amax},
                              {"index", m.index}, {"trt_scale_hex", m.trt_scale_hex}});
    }
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("tensor     %s  %s %s\n", o.file.c_str(), std::string(ir::DTypeName(tensor->dtype())).c_str(),
              ShapeText(tensor->dims()).c_str());
  std::printf("elements   %lld (NaN %lld, +Inf %lld, -Inf %lld, zeros %lld)\n",
              static_cast<long long>(r.count), static_cast<long long>(r.nan_count),
              static_cast<long long>(r.posinf_count), static_cast<long long>(r.neginf_count),
              static_cast<long long>(r.zero_count));
  std::printf("range      min %.9g  max %.9g  amax %.9g\n", r.min, r.max, r.amax);
  std::printf("histogram  |x|, %lld bins on [%.9g, %.9g], %lld non-empty\n\n",
              static_cast<long long>(report->num_bins), report->hist_first_edge,
              report->hist_last_edge, static_cast<long long>(report->nonempty_bins));
  std::printf("%-18s %-16s %-6s %s\n", "method", "amax", "bin", "trt scale (hex)");
  for (const auto& m : report->results) {
    std::printf("%-18s %-16.9g %-6s %s\n", quant::MethodLabel(m.request).c_str(), m.amax,
                m.index < 0 ? "-" : std::to_string(m.index).c_str(), m.trt_scale_hex.c_str());
  }
  return 0;
}

}  // namespace

void SetupTensorCalib(CLI::App& app, RunFn* run) {
  auto opts = std::make_shared<TensorCalibCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "tensor-calib", "Print the amax each calibration method gives for one tensor (.npy)");
  sub->add_option("file", opts->file, "tensor as a .npy file")->required();
  sub->add_option("--method", opts->methods,
                  "max, entropy, percentile[:P] (default P 99.99), mse or all; repeatable")
      ->delimiter(',');
  sub->add_option("--bins", opts->bins, "histogram bins (default 2048; memory and time grow with it)")
      ->transform(InRange(quant::kMinNumBins, quant::kMaxNumBins));
  sub->add_flag("--json", opts->json, "print JSON");
  sub->callback([opts, run] { *run = [opts] { return RunTensorCalib(*opts); }; });
}

}  // namespace quantkit::cli
