// quant_bench: histogramming cost per element and calibration search times.
//   build/dev/bench/quant/quant_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/vector_clones.h"
#include "quant/calibrators/calibrators.h"
#include "quant/collectors/histogram.h"
#include "quant/collectors/range.h"
#include "quant/collectors/tensor_collector.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {
namespace {

std::vector<float> Activations(size_t n) {
  std::mt19937 rng(42);
  std::exponential_distribution<float> e(1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (rng() & 1 ? 1.0f : -1.0f) * e(rng);
  return v;
}

// TV3's shape: H[k] = floor(4e6 / (k+8)^2) with a far outlier, [0, 8] in 2048 bins.
Histogram HeavyTailed(int64_t bins) {
  Histogram h;
  for (int64_t k = 0; k < bins; ++k)
    h.counts.push_back(static_cast<int64_t>(4000000.0 / ((k + 8.0) * (k + 8.0))));
  h.counts.back() += 3;
  for (int64_t k = 0; k <= bins; ++k)
    h.edges.push_back(8.0 * static_cast<double>(k) / static_cast<double>(bins));
  return h;
}

// ReLU output: half exact zeros (the hard case for a histogram: one bin takes every other value).
std::vector<float> ReluActivations(size_t n) {
  std::vector<float> v = Activations(n);
  for (float& x : v) x = std::max(x, 0.0f);
  return v;
}

void SetPerElement(benchmark::State& state, size_t n) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
  // Rate of elements per second, inverted and scaled: nanoseconds per element.
  state.counters["ns_per_element"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(n) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_StreamingHistogramObserve(benchmark::State& state) {
  const auto data = Activations(static_cast<size_t>(state.range(0)));
  StreamingHistogram h;
  for (auto _ : state) {
    h.Observe(FloatSpan(data));
    benchmark::DoNotOptimize(h.positive().data());
  }
  SetPerElement(state, data.size());
}
BENCHMARK(BM_StreamingHistogramObserve)->Arg(1 << 12)->Arg(1 << 16)->Arg(1 << 20);

// What calibration pays per activation (range + histogram), one thread and every thread
// (arg 2: OpenMP threads, as --threads sets them). Target: >= 1 GB/s per thread.
void CollectorBench(benchmark::State& state, const std::vector<float>& data) {
  omp_set_num_threads(static_cast<int>(state.range(1)));
  TensorCollector c;
  const TensorView view{FloatSpan(data), {static_cast<int64_t>(data.size())}};
  for (auto _ : state) {
    benchmark::DoNotOptimize(c.Observe(view));
  }
  SetPerElement(state, data.size());
  state.counters["threads"] = static_cast<double>(state.range(1));
  omp_set_num_threads(omp_get_num_procs());
}
void BM_TensorCollectorObserve(benchmark::State& state) {
  CollectorBench(state, Activations(static_cast<size_t>(state.range(0))));
}
void BM_TensorCollectorObserveRelu(benchmark::State& state) {
  CollectorBench(state, ReluActivations(static_cast<size_t>(state.range(0))));
}
// One thread: CPU time (meaningful on a shared machine). Every thread: wall time (a loaded machine
// makes it pessimistic).
BENCHMARK(BM_TensorCollectorObserve)->Args({1 << 12, 1})->Args({1 << 20, 1})->Args({1 << 22, 1});
BENCHMARK(BM_TensorCollectorObserve)
    ->Name("BM_TensorCollectorObserveAllThreads")
    ->Args({1 << 22, 2})
    ->UseRealTime();
BENCHMARK(BM_TensorCollectorObserveRelu)->Args({1 << 20, 1})->Args({1 << 22, 1});
BENCHMARK(BM_TensorCollectorObserveRelu)
    ->Name("BM_TensorCollectorObserveReluAllThreads")
    ->Args({1 << 22, 2})
    ->UseRealTime();

// The max path (calibrate --method max collects ranges only). Arg 2: OpenMP threads (0: every
// CPU); one thread is what bench/stats_cost.py compares with one read of the tensor (BM_OneRead).
void BM_RangeCollectorObserve(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
  const auto data = Activations(static_cast<size_t>(state.range(0)));
  RangeCollector c;
  for (auto _ : state) {
    c.Observe(FloatSpan(data));
    benchmark::DoNotOptimize(c);
  }
  SetPerElement(state, data.size());
  omp_set_num_threads(omp_get_num_procs());
}
BENCHMARK(BM_RangeCollectorObserve)->Args({1 << 16, 0})->Args({1 << 20, 0});
BENCHMARK(BM_RangeCollectorObserve)
    ->Name("BM_RangeCollectorObserveOneThread")
    ->Args({1 << 16, 1})
    ->Args({1 << 20, 1})
    ->Args({1 << 22, 1});

// The statistics' cost as a multiple of one read of the tensor (issue 45: the max path <= 1.5x, the
// histogram path <= 3x; bench/stats_cost.py prints the ratios). The read: an OR of every element's
// bits, vectorised at the widest width the CPU has (the clones and `omp simd` the collectors' own
// scan uses, quant/collectors/scan.cc), so it runs at the speed the memory delivers the tensor.
QK_VECTOR_CLONES uint32_t OrAll(const uint32_t* bits, size_t n) {
  uint32_t acc = 0;
#pragma omp simd reduction(| : acc)
  for (size_t i = 0; i < n; ++i) acc |= bits[i];
  return acc;
}

void BM_OneRead(benchmark::State& state) {
  const auto data = Activations(static_cast<size_t>(state.range(0)));
  const auto* bits = reinterpret_cast<const uint32_t*>(data.data());
  for (auto _ : state) benchmark::DoNotOptimize(OrAll(bits, data.size()));
  SetPerElement(state, data.size());
}
BENCHMARK(BM_OneRead)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 22);

void BM_ReferenceAbsHistogram2048(benchmark::State& state) {
  const auto data = Activations(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(PqAbsHistogram(FloatSpan(data), kDefaultNumBins));
  SetPerElement(state, data.size());
}
BENCHMARK(BM_ReferenceAbsHistogram2048)->Arg(1 << 16)->Arg(1 << 20);

void BM_EntropyPq2048(benchmark::State& state) {
  const Histogram h = HeavyTailed(kDefaultNumBins);
  for (auto _ : state) benchmark::DoNotOptimize(EntropyAmax(h, {}));
  state.SetLabel("pytorch-quantization entropy, 2048 bins");
}
BENCHMARK(BM_EntropyPq2048)->Unit(benchmark::kMicrosecond);

// Signed histogram mirrored around 0 from an |x| one: 2n bins, or 2n-1 (odd, centre = bin 0).
Histogram Mirror(const Histogram& h, bool odd) {
  Histogram s;
  s.counts.assign(h.counts.rbegin(), h.counts.rend() - (odd ? 1 : 0));
  s.counts.insert(s.counts.end(), h.counts.begin(), h.counts.end());
  const double half = static_cast<double>(s.counts.size()) / 2.0;
  const double w = h.edges[1] - h.edges[0];
  for (size_t k = 0; k <= s.counts.size(); ++k)
    s.edges.push_back((static_cast<double>(k) - half) * w);
  return s;
}

void BM_EntropyOrt2048(benchmark::State& state) {
  const Histogram s = Mirror(HeavyTailed(1024), /*odd=*/false);
  for (auto _ : state) benchmark::DoNotOptimize(OrtEntropyRange(s, {}));
  state.SetLabel("onnxruntime entropy, 2048 bins, 128 levels, float32 KL");
}
BENCHMARK(BM_EntropyOrt2048)->Unit(benchmark::kMillisecond);

void BM_MinimizeKl8001(benchmark::State& state) {
  const Histogram s = Mirror(HeavyTailed(4001), /*odd=*/true);
  for (auto _ : state) benchmark::DoNotOptimize(MinimizeKlThreshold(s, {}));
  state.SetLabel("MXNet/TVM MinimizeKL, 8001 bins, 255 levels");
}
BENCHMARK(BM_MinimizeKl8001)->Unit(benchmark::kMillisecond);

void BM_Mse2048(benchmark::State& state) {
  const Histogram h = HeavyTailed(kDefaultNumBins);
  for (auto _ : state) benchmark::DoNotOptimize(MseAmax(h, {}));
}
BENCHMARK(BM_Mse2048)->Unit(benchmark::kMillisecond);

void BM_Percentile2048(benchmark::State& state) {
  const Histogram h = HeavyTailed(kDefaultNumBins);
  for (auto _ : state) benchmark::DoNotOptimize(PercentileAmax(h, {}));
}
BENCHMARK(BM_Percentile2048)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace quantkit::quant

BENCHMARK_MAIN();
