#include "conformance/runner.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
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
    return fmt::format("dtype {} expected {}", ir::DTypeName(got.dtype()), ir::DTypeName(expected.dtype()));
  }
  if (expected.dims() != got.dims()) {
    return fmt::format("shape [{}] expected [{}]", fmt::join(got.dims(), ","), fmt::join(expected.dims(), ","));
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
  return fmt::format("{} of {} values differ; first at flat index {}: got {} expected {}", bad, a.numel(), first,
                     b.reshape({-1})[first].item<double>(), a.reshape({-1})[first].item<double>());
}

// Per-op tolerance exceptions, named in tolerances.h.
double AtolFor(const std::string& name, double atol) {
  static const char* kCancellation[] = {"test_erf", "test_tanh", "test_gelu", "test_layer_normalization",
                                        "test_group_normalization", "test_logsoftmax", "test_reduce_log_sum",
                                        "test_mish", "test_softplus", "test_atanh", "test_asinh", "test_acosh",
                                        "test_lppool", "test_lrn", "test_resize", "test_dft", "test_gru",
                                        "test_lstm", "test_rnn", "test_simple_rnn"};
  for (const char* p : kCancellation) {
    if (name.rfind(p, 0) == 0) return std::max(atol, kCancellationAtol);
  }
  return atol;
}

std::string RunCase(const fs::path& dir, const SuiteOptions& opt) {
  auto model = onnx_io::ImportModel((dir / "model.onnx").string());
  if (!model.ok()) return "import: " + model.status().ToString();
  runtime::InterpreterOptions options;
  options.warn = [](const std::string&) {};  // node tests feed NaN/Inf on purpose
  options.check_finite_inputs = false;
  auto interp = runtime::Interpreter::Create(std::move(model).value(), options);
  if (!interp.ok()) return interp.status().ToString();
  const runtime::Interpreter& it = **interp;
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  const std::string name = dir.filename().string();
  const double atol = AtolFor(name, opt.atol);
  for (const fs::path& set : sets) {
    std::vector<runtime::NamedTensor> inputs;
    // Inputs bind by position to the graph inputs (initializer-backed ones included, as in onnx).
    const auto& graph_inputs = it.model().graph->inputs();
    for (size_t k = 0;; ++k) {
      const fs::path f = set / fmt::format("input_{}.pb", k);
      if (!fs::exists(f)) break;
      auto t = onnx_io::ReadTensorProtoFile(f.string());
      if (!t.ok()) return "input: " + t.status().ToString();
      if (k >= graph_inputs.size()) return fmt::format("input_{}.pb has no graph input", k);
      inputs.push_back({graph_inputs[k]->name(), std::move(t).value()});
    }
    auto outs = it.Run(inputs);
    if (!outs.ok()) return outs.status().ToString();
    for (size_t k = 0;; ++k) {
      const fs::path f = set / fmt::format("output_{}.pb", k);
      if (!fs::exists(f)) break;
      auto t = onnx_io::ReadTensorProtoFile(f.string());
      if (!t.ok()) return "expected output: " + t.status().ToString();
      if (k >= outs->size()) return fmt::format("missing output {}", k);
      const std::string diff = Compare(*t, (*outs)[k].tensor, opt.rtol, atol);
      if (!diff.empty()) return fmt::format("{} output {} ('{}'): {}", set.filename().string(), k, (*outs)[k].name, diff);
    }
  }
  return "";
}

}  // namespace

SuiteResult RunSuite(const std::string& root, const std::vector<SkipRule>& skips, const SuiteOptions& options) {
  SuiteResult r;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    if (!options.filter.empty() && name.find(options.filter) == std::string::npos) continue;
    const bool skip = std::any_of(skips.begin(), skips.end(),
                                  [&](const SkipRule& s) { return std::regex_search(name, s.regex); });
    if (skip) {
      ++r.skipped;
      continue;
    }
    std::string why;
    try {
      why = RunCase(dir, options);
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

}  // namespace quantkit::testing
