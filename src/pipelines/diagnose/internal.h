// Pieces of `diagnose` shared between its files (not a public API).
#pragma once

#include <string>
#include <vector>

#include "pipelines/diagnose/diagnose.h"
#include "quant/collectors/tensor_collector.h"

namespace quantkit::pipelines::diagnose_internal {

// Thresholds (docs/diagnose.md).
inline constexpr double kOutlierRatio = 4.0;          // max / p99.99 above this: outliers dominate
inline constexpr double kEntropyClipShare = 0.01;     // entropy clipping more than 1% of the values
inline constexpr double kEntropyClipAmaxRatio = 0.8;  // ... with its amax below 80% of max
// Reference values beyond amax, in excess of the calibration set's own share: at least 0.1%, and
// at least 2/(N+1) — a new sample exceeds the max of N same-distribution samples with
// probability 1/(N+1), so small sets see some clipping by chance alone.
inline constexpr double kReferenceClipShare = 0.001;
inline constexpr double kShiftJsBits = 0.05;     // JS divergence counted as a distribution shift
inline constexpr double kSampleOutlierZ = 6.0;   // robust z of a sample's mean or std
inline constexpr double kBatchTolerance = 1e-3;  // relative amax/output difference batch 1 vs B
inline constexpr int kHistogramBins = 128;       // pictures

// Which chunks each bootstrap resample draws (with replacement) and which half-subsets the
// stability check uses; fixed by the seed so reports are reproducible.
struct Resampling {
  std::vector<std::vector<int>> draws;
  std::vector<std::vector<int>> subsets;
};
Resampling MakeResampling(int chunks, int bootstrap, int subsets, uint64_t seed);

// Everything about one tensor that the calibration chunks tell: amax per method, convergence,
// bootstrap interval, stability CV, degenerate statistics and the recommended method. `full`
// receives the merge of all chunks. `channels` is the per-channel abs-max (axis 1) or empty.
Result<TensorDiagnosis> AnalyzeTensor(const std::string& name,
                                      const std::vector<const quant::TensorCollector*>& chunks,
                                      const std::vector<int64_t>& chunk_end_samples,
                                      const Resampling& resampling,
                                      const quant::MethodRequest& method,
                                      const std::vector<float>& channel_amax,
                                      quant::TensorCollector* full);

// Degenerate-tensor findings (all-zero, constant, NaN/Inf, dead channels, outliers, entropy
// clipping) for one analysed tensor.
void TensorFindings(const TensorDiagnosis& t, const quant::MethodRequest& method,
                    std::vector<Finding>* out);

// Every finding of a result whose tensors, batch check and input statistics are filled in
// (sufficiency, stability, degenerate tensors, batch dependence, inputs, reference data); sets
// worst_ci_rel, moving, unstable, enough, suggested_samples, outliers and clean.
void AddFindings(const DiagnoseOptions& o, DiagnoseResult* r);

}  // namespace quantkit::pipelines::diagnose_internal
