// Calibration statistics of one tensor computed where the tensor lives (ATen-free header).
//
// This is the device side of quant::TensorCollector (docs/gpu.md): on a GPU the activations
// never come back to the host, only these summaries (a few scalars, 2 x 2^L bin counts and one
// float per channel). The algorithm is plain ATen, so it runs on CPU tensors too: the tests
// check on the CPU that it equals the host collectors byte for byte, and the same code runs on
// CUDA. Definitions, identical to quant/collectors/ (range.h, histogram.h, per_channel.h):
//  - range: element count; NaN, +Inf, -Inf and zero (+-0) counts; min/max over finite values
//    (+inf/-inf when there is none, -0 reported as +0);
//  - histogram (docs/histogram-policy.md): e = the exponent of the smallest power of two
//    strictly above this batch's largest finite |x| (at least min_range_exp); fine bin
//    k = floor(|x| * 2^(L - e)) for finite x != 0, one half per sign; zeros and non-finite
//    values are counted apart. |x| * 2^(L-e) is exact in double, so k matches the host exactly,
//    and the host merges this batch histogram into its running one exactly (partition
//    invariance);
//  - per channel (optional): max |x| over finite values of each slice along `axis` (0 where
//    none), plus the count of non-finite values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/status.h"
#include "runtime/device.h"
#include "runtime/observer.h"

namespace quantkit::runtime {

struct TensorStatsRequest {
  int log2_bins = 14;        // fine bins per sign = 2^log2_bins (quant/collectors/histogram.h)
  int min_range_exp = -126;  // quant::kMinRangeExp
  std::optional<int64_t> channel_axis;  // per-channel abs-max along this axis (may be negative)
  bool histogram = true;                // false: range statistics only (the max-only fast path)
};

struct TensorStats {
  std::vector<int64_t> shape;
  // Range.
  int64_t count = 0;
  int64_t nan_count = 0;
  int64_t posinf_count = 0;
  int64_t neginf_count = 0;
  int64_t zero_count = 0;
  float min = 0, max = 0;  // +inf / -inf when no finite value
  // Histogram of this batch alone (when requested: has_histogram).
  bool has_histogram = true;
  bool has_range = false;  // a finite non-zero value was seen
  int range_exp = 0;
  std::vector<int64_t> positive, negative;  // 2^log2_bins each
  // Per channel (when requested).
  bool has_per_channel = false;
  int64_t axis = 0;  // normalised
  std::vector<float> channel_amax;
  int64_t channel_nonfinite = 0;

  int64_t nonfinite_count() const { return nan_count + posinf_count + neginf_count; }
};

// Copies the host view to `device` and summarises it there (tests, benchmarks). The view's
// dtype must be numeric (non-float dtypes are converted to float32, as observers see them).
Result<TensorStats> ComputeTensorStats(const TensorView& view, const TensorStatsRequest& request,
                                       const Device& device);

}  // namespace quantkit::runtime
