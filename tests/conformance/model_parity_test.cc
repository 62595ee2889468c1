// Device parity on whole models (issue 26): the zoo (models/zoo) and the real models of
// docs/realmodels-table.md (python -m qkdev.realmodels caches them under
// ${QUANTKIT_CACHE:-~/.cache/quantkit}/realmodels) run on each parity device (parity_devices.h)
// and are compared with the CPU, output by output, with the node cases' rules (runner.h).
// Models bring what single nodes do not: host shape tensors (Shape -> Gather -> Concat ->
// Reshape), initializers that stay on the host (runtime/device_placement.h), control flow.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "conformance/parity_devices.h"
#include "conformance/runner.h"
#include "data/source.h"
#include "onnx/import.h"
#include "runtime/interpreter.h"

namespace quantkit::testing {
namespace {

namespace fs = std::filesystem;

// Runs `model_path` on the CPU and on `device` over `batches`; "" when within parity, else why.
std::string CompareModel(const std::string& model_path, const std::vector<data::Batch>& batches,
                         const runtime::Device& device, Parity* worst) {
  std::vector<std::vector<runtime::NamedTensor>> outs[2];
  const runtime::Device devices[2] = {runtime::Device{}, device};
  runtime::ResetMixedDeviceRetries();
  for (int d = 0; d < 2; ++d) {
    auto model = onnx_io::ImportModel(model_path);
    if (!model.ok()) return model.status().ToString();
    runtime::InterpreterOptions options;
    options.device = devices[d];
    auto interp = runtime::Interpreter::Create(std::move(*model), options);
    if (!interp.ok()) return devices[d].ToString() + ": " + interp.status().ToString();
    for (const data::Batch& b : batches) {
      std::vector<runtime::NamedTensor> feeds;
      for (const auto& [name, t] : b.inputs) feeds.push_back({name, t});
      auto o = (*interp)->Run(feeds);
      if (!o.ok()) return devices[d].ToString() + ": " + o.status().ToString();
      outs[d].push_back(std::move(*o));
    }
  }
  const std::string retries = runtime::MixedDeviceRetries();
  if (!retries.empty()) return "kernels met host and device tensors (retried): " + retries;
  *worst = Parity::kEqual;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (size_t k = 0; k < outs[0][b].size(); ++k) {
      std::string why;
      const Parity p = CompareWithCpu(outs[0][b][k].tensor, outs[1][b][k].tensor, &why);
      if (p == Parity::kFailing)
        return fmt::format("batch {} output '{}': {}", b, outs[0][b][k].name, why);
      *worst = std::max(*worst, p);
    }
  }
  return "";
}

// The first `samples` samples of `spec`, in as few batches as stack.
Result<std::vector<data::Batch>> FirstSamples(const std::string& model_path,
                                              const std::string& spec, int64_t samples) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(model_path));
  QK_ASSIGN_OR_RETURN(auto source, data::OpenSource(spec, data::ModelInputs(model)));
  const int64_t n = std::min<int64_t>(samples, source->num_samples());
  const int64_t cap = source->max_batch() > 0 ? source->max_batch() : n;
  std::vector<data::Batch> out;
  for (int64_t start = 0; start < n; start += cap) {
    QK_ASSIGN_OR_RETURN(auto batches,
                        data::ReadStackable(*source, start, std::min(cap, n - start)));
    for (auto& b : batches) out.push_back(std::move(b));
  }
  return out;
}

struct ModelCase {
  std::string name, path, data;
};

void RunModels(const std::vector<ModelCase>& cases, int64_t samples, const char* what) {
  auto devices = ParityDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  for (const runtime::Device& device : *devices) {
    DeviceParity p;
    p.device = device.ToString();
    for (const ModelCase& c : cases) {
      auto batches = FirstSamples(c.path, c.data, samples);
      ASSERT_TRUE(batches.ok()) << c.name << ": " << batches.status().ToString();
      Parity worst = Parity::kEqual;
      const std::string why = CompareModel(c.path, *batches, device, &worst);
      if (!why.empty()) {
        ++p.failing;
        p.failures.push_back(c.name + ": " + why);
        std::printf("PARITY FAILED %s %s: %s\n", p.device.c_str(), c.name.c_str(), why.c_str());
      } else {
        ++(worst == Parity::kEqual ? p.equal : p.within);
      }
    }
    std::printf("%s\n", p.Summary(what).c_str());
    EXPECT_EQ(p.failing, 0) << p.device;
  }
}

TEST(Parity, ZooModels) {
  std::vector<ModelCase> cases;
  for (const auto& e : fs::directory_iterator(fs::path(QK_SOURCE_DIR) / "models/zoo")) {
    if (e.path().extension() == ".onnx") {
      cases.push_back({e.path().stem().string(), e.path().string(), "fashion-mnist:test"});
    }
  }
  std::sort(cases.begin(), cases.end(),
            [](const ModelCase& a, const ModelCase& b) { return a.name < b.name; });
  ASSERT_FALSE(cases.empty());
  RunModels(cases, 16, "zoo models");
}

TEST(Parity, RealModels) {
  const char* cache = std::getenv("QUANTKIT_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path root = cache && *cache
                            ? fs::path(cache) / "realmodels"
                            : fs::path(home ? home : "/") / ".cache/quantkit/realmodels";
  // The set of docs/realmodels-table.md (qkdev/realmodels.py MODELS).
  const char* kNames[] = {"seg_opset9", "seg_opset11", "fixed_b1",  "textline",
                          "gru_state",  "if_model",    "if_static", "audio_frontend",
                          "ppocr_det",  "ppocr_rec",   "ppocr_cls", "silero_vad"};
  std::vector<ModelCase> cases;
  std::vector<std::string> missing;
  for (const char* name : kNames) {
    const fs::path dir = root / name;
    if (fs::exists(dir / "model.onnx") && fs::is_directory(dir / "calib")) {
      cases.push_back({name, (dir / "model.onnx").string(), (dir / "calib").string()});
    } else {
      missing.push_back(name);
    }
  }
  if (!missing.empty()) {
    std::printf("not cached under %s (python -m qkdev.realmodels makes them): %s\n", root.c_str(),
                fmt::format("{}", fmt::join(missing, ", ")).c_str());
  }
  if (cases.empty()) GTEST_SKIP() << "no real model cached under " << root;
  RunModels(cases, 4, "real models");
}

}  // namespace
}  // namespace quantkit::testing
