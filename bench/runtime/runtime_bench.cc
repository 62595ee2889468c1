// Latency of Interpreter::Run, batch 1 and 8 (benchmark arg), float32 [B, 3, 224, 224], on every
// model in
// ${QUANTKIT_CACHE:-~/.cache/quantkit}/models (written by qkdev/export_torchvision.py).
// Counters: peak_live_MB (liveness-tracked activations + weights views) per run.
// bench/runtime/ort_latency.py runs this and onnxruntime side by side and prints the ratios.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "onnx/import.h"
#include "runtime/interpreter.h"

namespace {

namespace fs = std::filesystem;
using quantkit::runtime::Interpreter;

std::string CacheDir() {
  const char* env = std::getenv("QUANTKIT_CACHE");
  const char* home = std::getenv("HOME");
  return (env ? fs::path(env) : fs::path(home ? home : "/tmp") / ".cache" / "quantkit").string() +
         "/models";
}

void RunModel(benchmark::State& state, const std::string& path) {
  auto model = quantkit::onnx_io::ImportModel(path);
  if (!model.ok()) return state.SkipWithError(model.status().ToString().c_str());
  auto interp = Interpreter::Create(std::move(model).value());
  if (!interp.ok()) return state.SkipWithError(interp.status().ToString().c_str());
  quantkit::ir::Tensor x(quantkit::ir::DType::kFloat, {state.range(0), 3, 224, 224});
  float* p = x.mutable_data_as<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
  const std::string name = (*interp)->input_names().at(0);
  quantkit::runtime::RunStats stats;
  for (auto _ : state) {
    quantkit::runtime::RunOptions opts;
    opts.stats = &stats;
    auto out = (*interp)->Run({{name, x}}, opts);
    if (!out.ok()) return state.SkipWithError(out.status().ToString().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["peak_live_MB"] = static_cast<double>(stats.peak_live_bytes) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string dir = CacheDir();
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".onnx") continue;
      const std::string path = e.path().string();
      benchmark::RegisterBenchmark(e.path().stem().string().c_str(),
                                   [path](benchmark::State& s) { RunModel(s, path); })
          ->Arg(1)
          ->Arg(8)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(2.0);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
