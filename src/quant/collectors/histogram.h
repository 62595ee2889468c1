// StreamingHistogram: a deterministic, partition-invariant histogram of float32 data.
//
// Policy (docs/histogram-policy.md): the fine grid is 2^L bins per sign over [0, R), R = 2^e the
// smallest power of two strictly greater than the largest finite |x| seen (at least 2^-126), so a
// fine bin has width w = 2^(e-L), itself a power of two. A value x != 0 goes to bin
// floor(|x| / w) of the positive or negative half; exact zeros (±0) are counted apart; NaN and
// ±Inf are counted apart and never binned. Because w is a power of two, |x| / w is exact, so each
// value's bin depends on x and e only. Growing the range from e to e+d merges 2^d adjacent bins
// exactly, and floor(floor(|x|/w)/2^d) == floor(|x|/(w 2^d)): the histogram after any sequence of
// Observe/Merge calls equals the one-shot histogram at the final e, which depends only on the
// multiset of values. Hence final statistics are bit-identical whatever the batch size, order or
// sharding. Memory is 2^(L+1) + O(1) counters, independent of the number of samples.
//
// Reference-style histograms (numpy edges over [0, amax] or (-T, T)) are produced by re-binning
// (each fine bin goes to the target bin holding its centre); the approximation this implies is
// bounded by half a fine bin per value and quantified on TV2 in docs/histogram-policy.md.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/collectors/scan.h"
#include "quant/histogram.h"
#include "quant/span.h"
#include "quantkit/status.h"

namespace quantkit::quant {

inline constexpr int kDefaultStreamLog2Bins = 14;  // 16384 fine bins per sign
inline constexpr int kMinStreamLog2Bins = 4;
inline constexpr int kMaxStreamLog2Bins = 20;
inline constexpr int kMinRangeExp = -126;  // R >= 2^-126 (FLT_MIN): subnormals share bin 0.. of it
inline constexpr int kMaxRangeExp = 128;   // R <= 2^128 > FLT_MAX

class StreamingHistogram {
 public:
  explicit StreamingHistogram(int log2_bins = kDefaultStreamLog2Bins);

  void Observe(FloatSpan values);
  // Observe that also returns the values' scan::Summary, computed in the same pass (what
  // TensorCollector hands to its RangeCollector instead of scanning the tensor again).
  scan::Summary ObserveAndSummarize(FloatSpan values);
  // Adds `other` (same log2_bins; checked, a mismatch is an InternalError).
  void Merge(const StreamingHistogram& other);

  int log2_bins() const { return log2_bins_; }
  int64_t bins_per_sign() const { return int64_t{1} << log2_bins_; }
  // True while no finite non-zero value has been binned (range_exp is then meaningless).
  bool empty_range() const { return !has_range_; }
  int range_exp() const { return range_exp_; }
  double bin_width() const;  // 2^(range_exp - log2_bins)
  const std::vector<int64_t>& positive() const { return pos_; }
  const std::vector<int64_t>& negative() const { return neg_; }
  int64_t zero_count() const { return zeros_; }
  int64_t nonfinite_count() const { return nonfinite_; }
  int64_t binned_count() const;  // positive + negative + zeros

  // Re-bins |x| into num_bins numpy-style float32 edges over [0, amax] (pytorch-quantization's
  // torch-path range). Pass the exact abs-max (RangeStats::amax).
  Histogram RebinAbs(int64_t num_bins, float amax) const;
  // Re-bins signed x into num_bins edges over (-t, t) (onnxruntime / MXNet), t = max(|min|,|max|).
  Histogram RebinSigned(int64_t num_bins, float t) const;
  // The fine |x| histogram itself: bins [k w, (k+1) w) for k < ceil(amax / w) (exact edges).
  Histogram FineAbsHistogram() const;

  // Rebuilds from stored parts (the .qkstats reader); validates sizes and the exponent.
  static Result<StreamingHistogram> FromParts(int log2_bins, bool has_range, int range_exp,
                                              std::vector<int64_t> positive,
                                              std::vector<int64_t> negative, int64_t zeros,
                                              int64_t nonfinite);

  bool operator==(const StreamingHistogram& o) const;

 private:
  void GrowTo(int new_exp);
  void BinWithNonFinite(FloatSpan values);  // value by value, NaN/Inf counted apart

  int log2_bins_;
  bool has_range_ = false;
  int range_exp_ = kMinRangeExp;
  std::vector<int64_t> pos_, neg_;
  int64_t zeros_ = 0;
  int64_t nonfinite_ = 0;
};

// Share of the finite values summarised by `h` whose |x| exceeds `threshold`, counting the fine
// bins that lie wholly above it: the bin holding the threshold is left out, so values equal to
// the threshold (a spike at the max, e.g. saturated pixels) are never counted as clipped; the
// share is low by at most that one fine bin (1/2^14 of the range). Calibration reports it per
// tensor (the clipped share) and `quantkit diagnose` judges ranges by it.
double ShareAbove(const StreamingHistogram& h, double threshold);

}  // namespace quantkit::quant
