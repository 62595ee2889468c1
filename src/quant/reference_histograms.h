// Reference-compatible histograms: the exact binning of numpy 1.24 that pytorch-quantization,
// onnxruntime, TVM and MXNet use (calibration-spec §9.1), so that the calibrators reproduce their
// numbers bit for bit when fed the same data in one shot.
//
//   edges  = float64 linspace(lo, hi, n+1) rounded to float32 (last edge = hi exactly)
//   bin(v) = k with E[k] <= v < E[k+1]; the last bin is closed; v outside [E[0], E[n]] dropped.
//
// These need all the data at once (their range comes from the data). For streaming,
// partition-invariant collection use StreamingHistogram and re-bin (collectors/histogram.h).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/histogram.h"
#include "quant/span.h"

namespace quantkit::quant {

// numpy.linspace(lo, hi, n + 1) in float64, each value rounded to float32 (as double).
std::vector<double> NumpyUniformEdgesF32(double lo, double hi, int64_t num_bins);

// np.histogram(values, num_bins, range=(lo, hi)) for float32 data: float32 edges, values kept
// when lo <= v <= hi (compared in double, as numpy compares with the range scalars). If
// `absolute`, bins |v|. NaN values are never counted. Requires num_bins >= 1 and lo <= hi
// (lo == hi is widened by ±0.5 as numpy does).
Histogram NumpyHistogram(FloatSpan values, int64_t num_bins, double lo, double hi, bool absolute);

// onnxruntime HistogramCollector.collect_value + merge_histogram (spec §4 D), one Observe per
// collect_data() call: the signed histogram over (-T, T) regrows by whole bins on each side, with
// onnxruntime's float32/float64 arithmetic, so the result equals onnxruntime's for the same
// batches.
class OrtSignedStreamHistogram {
 public:
  explicit OrtSignedStreamHistogram(int64_t num_bins) : num_bins_(num_bins) {}
  void Observe(FloatSpan batch);
  // The histogram with observed_min / observed_max set.
  const Histogram& histogram() const { return hist_; }
  double threshold() const { return t_; }

 private:
  int64_t num_bins_;
  Histogram hist_;
  bool empty_ = true;
  double t_ = 0.0;  // T, a float32 value until the first regrowth, float64 afterwards
  bool t_is_f32_ = true;
};

// Bins `values` (|values| if absolute) into an existing histogram's float32/float64 edges with the
// same E[k] <= v < E[k+1] rule; returns the number of values dropped (outside the edges or NaN).
int64_t AccumulateOnEdges(FloatSpan values, bool absolute, Histogram* hist);

// pytorch-quantization numpy path / onnxruntime collect_absolute_value, one shot:
// np.histogram(|x|, num_bins) over [min|x|, max|x|]; observed_min/max = signed data range.
Histogram PqAbsHistogram(FloatSpan values, int64_t num_bins);
// onnxruntime collect_value / TVM / MXNet, one shot: np.histogram(x, num_bins, range=(-T, T)),
// T = max(|min|, |max|) as float32.
Histogram SignedSymmetricHistogram(FloatSpan values, int64_t num_bins);

// pytorch-quantization HistogramCalibrator.collect (numpy path, spec §4 A) and onnxruntime
// collect_absolute_value (§4 C), one Observe per batch / collect_data() call: an |x| histogram
// started with np.histogram(|x|, n) on the first batch and extended with
// np.arange(E[-1] + w, max + w, w) (float64) when a batch exceeds the last edge; old counts are
// added to the first bins, values below E[0] are dropped. kOnnxRuntime casts the edges back to
// float32 after every batch (TV2: the 20.0 sample falls beyond the last edge 19.99971).
enum class AbsStreamFlavor { kPytorchQuantization, kOnnxRuntime };

class AbsStreamHistogram {
 public:
  AbsStreamHistogram(int64_t num_bins, AbsStreamFlavor flavor)
      : num_bins_(num_bins), flavor_(flavor) {}
  void Observe(FloatSpan batch);
  const Histogram& histogram() const { return hist_; }

 private:
  int64_t num_bins_;
  AbsStreamFlavor flavor_;
  Histogram hist_;
  bool empty_ = true;
};

// numpy's pairwise summation (the order np.sum / np.mean use for a contiguous 1-D array).
float PairwiseSum(const float* values, int64_t n);
double PairwiseSum(const double* values, int64_t n);

}  // namespace quantkit::quant
