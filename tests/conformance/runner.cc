#include "conformance/runner.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnx/import.h"
#include "onnx/tensor_file.h"
#include "runtime/aten_bridge.h"
#include "runtime/interpreter.h"
#include "testing/tolerances.h"

namespace quantkit::testing {

namespace fs = std::filesystem;

bool LoadSkips(const std::string& path, std::vector<SkipRule>* rules, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false,
                                           /*ignore_comments=*/true);
  if (j.is_discarded() || !j.is_object()) {
    *error = path + ": not a JSON object";
    return false;
  }
  for (auto& [category, entries] : j.items()) {
    for (auto& [pattern, reason] : entries.items()) {
      rules->push_back({category, pattern, std::regex(pattern), reason.get<std::string>()});
    }
  }
  return true;
}

namespace {

// Compares one output; returns "" when equal within tolerance.
std::string Compare(const ir::Tensor& expected, const ir::Tensor& got, double rtol, double atol) {
  if (expected.dtype() != got.dtype()) {
    return fmt::format("dtype {} expected {}", ir::DTypeName(got.dtype()),
                       ir::DTypeName(expected.dtype()));
  }
  if (expected.dims() != got.dims()) {
    return fmt::format("shape [{}] expected [{}]", fmt::join(got.dims(), ","),
                       fmt::join(expected.dims(), ","));
  }
  auto e = runtime::WrapTensor(expected, "expected");
  auto g = runtime::WrapTensor(got, "got");
  if (!e.ok()) return e.status().ToString();
  if (!g.ok()) return g.status().ToString();
  if (expected.numel() == 0) return "";
  at::Tensor a = e->to(at::kDouble), b = g->to(at::kDouble);
  at::Tensor both_nan = at::isnan(a) & at::isnan(b);
  at::Tensor same_inf = at::isinf(a) & (a == b);
  at::Tensor close = (at::abs(a - b) <= atol + rtol * at::abs(a)) | both_nan | same_inf;
  if (close.all().item<bool>()) return "";
  const int64_t bad = (~close).sum().item<int64_t>();
  const int64_t first = at::nonzero(~close.reshape({-1}))[0][0].item<int64_t>();
  return fmt::format("{} of {} values differ; first at flat index {}: got {} expected {}", bad,
                     a.numel(), first, b.reshape({-1})[first].item<double>(),
                     a.reshape({-1})[first].item<double>());
}

// Per-op tolerance exceptions, named in tolerances.h.
double AtolFor(const std::string& name, double atol) {
  static const char* kCancellation[] = {"test_erf",
                                        "test_tanh",
                                        "test_gelu",
                                        "test_layer_normalization",
                                        "test_group_normalization",
                                        "test_logsoftmax",
                                        "test_reduce_log_sum",
                                        "test_mish",
                                        "test_softplus",
                                        "test_atanh",
                                        "test_asinh",
                                        "test_acosh",
                                        "test_lppool",
                                        "test_lrn",
                                        "test_resize",
                                        "test_dft",
                                        "test_gru",
                                        "test_lstm",
                                        "test_rnn",
                                        "test_simple_rnn"};
  for (const char* p : kCancellation) {
    if (name.rfind(p, 0) == 0) return std::max(atol, kCancellationAtol);
  }
  return atol;
}

runtime::InterpreterOptions CaseOptions(const std::optional<runtime::Device>& device) {
  runtime::InterpreterOptions options;
  options.warn = [](const std::string&) {};  // node tests feed NaN/Inf on purpose
  options.check_finite_inputs = false;
  options.device = device;
  return options;
}

struct DataSet {
  std::string name;
  std::vector<runtime::NamedTensor> inputs;
  std::vector<ir::Tensor> expected;
};

// Every test_data_set_N of a case; inputs bind by position to the graph inputs (initializer-backed
// ones included, as in onnx).
std::string ReadDataSets(const fs::path& dir, const runtime::Interpreter& it,
                         std::vector<DataSet>* out) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  const auto& graph_inputs = it.model().graph->inputs();
  for (const fs::path& set : sets) {
    DataSet d;
    d.name = set.filename().string();
    for (size_t k = 0;; ++k) {
      const fs::path f = set / fmt::format("input_{}.pb", k);
      if (!fs::exists(f)) break;
      auto t = onnx_io::ReadTensorProtoFile(f.string());
      if (!t.ok()) return "input: " + t.status().ToString();
      if (k >= graph_inputs.size()) return fmt::format("input_{}.pb has no graph input", k);
      d.inputs.push_back({graph_inputs[k]->name(), std::move(t).value()});
    }
    for (size_t k = 0;; ++k) {
      const fs::path f = set / fmt::format("output_{}.pb", k);
      if (!fs::exists(f)) break;
      auto t = onnx_io::ReadTensorProtoFile(f.string());
      if (!t.ok()) return "expected output: " + t.status().ToString();
      d.expected.push_back(std::move(t).value());
    }
    out->push_back(std::move(d));
  }
  return "";
}

// The case on one device: every data set's outputs, or why it failed.
std::string RunOn(const fs::path& dir, const std::optional<runtime::Device>& device,
                  std::vector<DataSet>* sets,
                  std::vector<std::vector<runtime::NamedTensor>>* outs) {
  auto model = onnx_io::ImportModel((dir / "model.onnx").string());
  if (!model.ok()) return "import: " + model.status().ToString();
  auto interp = runtime::Interpreter::Create(std::move(model).value(), CaseOptions(device));
  if (!interp.ok()) return interp.status().ToString();
  if (sets->empty()) {
    const std::string why = ReadDataSets(dir, **interp, sets);
    if (!why.empty()) return why;
  }
  for (const DataSet& set : *sets) {
    auto o = (*interp)->Run(set.inputs);
    if (!o.ok()) return set.name + ": " + o.status().ToString();
    outs->push_back(std::move(o).value());
  }
  return "";
}

std::string RunCase(const fs::path& dir, const SuiteOptions& opt,
                    std::vector<DeviceParity>* parity) {
  std::vector<DataSet> sets;
  std::vector<std::vector<runtime::NamedTensor>> cpu;
  std::string why = RunOn(dir, runtime::Device{}, &sets, &cpu);
  if (!why.empty()) return why;
  const std::string name = dir.filename().string();
  const double atol = AtolFor(name, opt.atol);
  for (size_t i = 0; i < sets.size() && why.empty(); ++i) {
    for (size_t k = 0; k < sets[i].expected.size(); ++k) {
      if (k >= cpu[i].size()) {
        why = fmt::format("missing output {}", k);
        break;
      }
      const std::string diff = Compare(sets[i].expected[k], cpu[i][k].tensor, opt.rtol, atol);
      if (!diff.empty()) {
        why = fmt::format("{} output {} ('{}'): {}", sets[i].name, k, cpu[i][k].name, diff);
        break;
      }
    }
  }
  // Device parity: the same data sets on each device, compared with the CPU's outputs (also
  // where the CPU disagrees with the reference: parity is about the devices agreeing).
  for (size_t d = 0; d < opt.devices.size(); ++d) {
    DeviceParity& p = (*parity)[d];
    std::vector<std::vector<runtime::NamedTensor>> dev;
    runtime::ResetMixedDeviceRetries();
    std::string fail = RunOn(dir, opt.devices[d], &sets, &dev);
    const std::string retries = runtime::MixedDeviceRetries();
    if (fail.empty() && !retries.empty())
      fail = "kernels met host and device tensors (retried): " + retries;
    Parity worst = Parity::kEqual;
    for (size_t i = 0; i < sets.size() && fail.empty(); ++i) {
      for (size_t k = 0; k < cpu[i].size() && fail.empty(); ++k) {
        std::string diff;
        const Parity r = CompareWithCpu(cpu[i][k].tensor, dev[i][k].tensor, &diff);
        if (r == Parity::kFailing)
          fail = fmt::format("{} output {} ('{}'): {}", sets[i].name, k, cpu[i][k].name, diff);
        worst = std::max(worst, r);
      }
    }
    if (!fail.empty()) {
      ++p.failing;
      p.failures.push_back(name + ": " + fail.substr(0, 400));
    } else if (worst == Parity::kWithin) {
      ++p.within;
    } else {
      ++p.equal;
    }
  }
  return why;
}

}  // namespace

SuiteResult RunSuite(const std::string& root, const std::vector<SkipRule>& skips,
                     const SuiteOptions& options) {
  SuiteResult r;
  for (const runtime::Device& d : options.devices) {
    r.parity.emplace_back();
    r.parity.back().device = d.ToString();
  }
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    if (!options.filter.empty() && name.find(options.filter) == std::string::npos) continue;
    const bool skip = std::any_of(skips.begin(), skips.end(), [&](const SkipRule& s) {
      return std::regex_search(name, s.regex);
    });
    if (skip) {
      ++r.skipped;
      continue;
    }
    std::string why;
    try {
      why = RunCase(dir, options, &r.parity);
    } catch (const std::exception& e) {
      why = std::string("exception: ") + e.what();
    }
    if (why.empty()) {
      ++r.passed;
    } else {
      ++r.failed;
      r.failures.push_back(name + ": " + why.substr(0, 400));
    }
  }
  return r;
}

Parity CompareWithCpu(const ir::Tensor& cpu, const ir::Tensor& device, std::string* why) {
  if (cpu.dtype() != device.dtype()) {
    *why = fmt::format("dtype {} on the CPU, {} on the device", ir::DTypeName(cpu.dtype()),
                       ir::DTypeName(device.dtype()));
    return Parity::kFailing;
  }
  if (cpu.dims() != device.dims()) {
    *why = fmt::format("shape [{}] on the CPU, [{}] on the device", fmt::join(cpu.dims(), ","),
                       fmt::join(device.dims(), ","));
    return Parity::kFailing;
  }
  if (cpu.nbytes() == device.nbytes() &&
      (cpu.nbytes() == 0 || std::memcmp(cpu.data(), device.data(), cpu.nbytes()) == 0)) {
    return Parity::kEqual;
  }
  auto c = runtime::WrapTensor(cpu, "cpu");
  auto g = runtime::WrapTensor(device, "device");
  if (!c.ok() || !g.ok()) {
    *why = "values differ (a dtype ATen cannot compare)";
    return Parity::kFailing;
  }
  if (!at::isFloatingType(c->scalar_type()) && !at::isComplexType(c->scalar_type())) {
    const int64_t bad = c->ne(*g).sum().item<int64_t>();
    *why = fmt::format("{} of {} {} values differ (integer and bool outputs must be equal)", bad,
                       c->numel(), ir::DTypeName(cpu.dtype()));
    return Parity::kFailing;
  }
  const at::Tensor a = c->to(at::kDouble), b = g->to(at::kDouble);
  const at::Tensor finite = at::isfinite(a);
  const double scale = a.numel() && finite.any().item<bool>()
                           ? a.masked_select(finite).abs().max().item<double>()
                           : 0;
  const double atol = kDeviceParityScaleAtol * scale;
  const at::Tensor close = (at::abs(a - b) <= atol + kDeviceParityRtol * at::abs(a)) |
                           (at::isnan(a) & at::isnan(b)) | (at::isinf(a) & (a == b));
  if (close.all().item<bool>()) return Parity::kWithin;
  const int64_t bad = (~close).sum().item<int64_t>();
  const int64_t first = at::nonzero(~close.reshape({-1}))[0][0].item<int64_t>();
  *why = fmt::format(
      "{} of {} values beyond tolerance; first at flat index {}: {} on the device, {} on the CPU",
      bad, a.numel(), first, b.reshape({-1})[first].item<double>(),
      a.reshape({-1})[first].item<double>());
  return Parity::kFailing;
}

std::string DeviceParity::Summary(const std::string& what) const {
  return fmt::format("{} {} on {}: {} equal, {} within tolerance, {} failing",
                     equal + within + failing, what, device, equal, within, failing);
}

}  // namespace quantkit::testing
