// The histogram every calibrator consumes: int64 counts over explicit edges.
//
// Edges are stored as double so that one type holds both float32-edged histograms (numpy
// `np.histogram` of float32 data, onnxruntime, MXNet) and the float64 edges that
// pytorch-quantization's streaming growth produces (`np.arange` returns float64). A float32 edge
// is exactly representable as a double; `edge_dtype` records which rounding the edges carry so
// calibrators can reproduce the reference arithmetic (e.g. MSE casts edges to float32 first).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace quantkit::quant {

enum class EdgeDType { kFloat32, kFloat64 };

struct Histogram {
  std::vector<int64_t> counts;  // counts.size() bins
  std::vector<double> edges;    // counts.size() + 1 edges, non-decreasing
  EdgeDType edge_dtype = EdgeDType::kFloat32;
  // Observed data range (signed), needed by onnxruntime's final clip to [min, max]. NaN = unknown.
  double observed_min = std::numeric_limits<double>::quiet_NaN();
  double observed_max = std::numeric_limits<double>::quiet_NaN();

  int64_t num_bins() const { return static_cast<int64_t>(counts.size()); }
  int64_t Total() const;
  // Empty string when well formed, else what is wrong (sizes, non-finite or decreasing edges,
  // negative counts).
  std::string Validate() const;
};

}  // namespace quantkit::quant
