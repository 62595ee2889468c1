// quant_bench: histogramming cost per element and calibration search times.
//   build/dev/bench/quant/quant_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/calibrators/calibrators.h"
#include "quant/collectors/histogram.h"
#include "quant/collectors/range.h"
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
  for (int64_t k = 0; k < bins; ++k) h.counts.push_back(static_cast<int64_t>(4000000.0 / ((k + 8.0) * (k + 8.0))));
  h.counts.back() += 3;
  for (int64_t k = 0; k <= bins; ++k) h.edges.push_back(8.0 * static_cast<double>(k) / static_cast<double>(bins));
  return h;
}

void SetPerElement(benchmark::State& state, size_t n) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  // Rate of elements per second, inverted and scaled: nanoseconds per element.
  state.counters["ns_per_element"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(n) * 1e-9,
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

void BM_RangeCollectorObserve(benchmark::State& state) {
  const auto data = Activations(static_cast<size_t>(state.range(0)));
  RangeCollector c;
  for (auto _ : state) {
    c.Observe(FloatSpan(data));
    benchmark::DoNotOptimize(c);
  }
  SetPerElement(state, data.size());
}
BENCHMARK(BM_RangeCollectorObserve)->Arg(1 << 16)->Arg(1 << 20);

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
  for (size_t k = 0; k <= s.counts.size(); ++k) s.edges.push_back((static_cast<double>(k) - half) * w);
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
