// The two O(elements) kernels behind the collectors, vectorised and multithreaded (OpenMP, the
// runtime ATen already uses, so `--threads` bounds both).
//
// Results are integer sums and min/max of finite values, so they do not depend on how the span
// is split between threads (or on the thread count): collectors stay bit-identical and
// partition-invariant (docs/histogram-policy.md).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/span.h"

namespace quantkit::quant::scan {

// Below this many values a tensor is scanned by the calling thread alone (thread start-up and
// the per-thread counters would cost more than the scan).
inline constexpr size_t kParallelMinValues = size_t{1} << 16;

struct Summary {
  float min = 0.0f;        // over finite values (+inf while none); -0.0 and +0.0 may both appear
  float max = 0.0f;        // over finite values (-inf while none)
  int64_t zeros = 0;       // +0.0 and -0.0
  bool nonfinite = false;  // some NaN or ±Inf present
};

Summary Summarize(FloatSpan values);

// Counts every value x != 0 in bin floor(|x| * 2^(log2_bins - range_exp)) of pos (x > 0) or neg
// (x < 0), and exact zeros (±0) in *zeros. Requires every value finite and |x| <= amax <
// 2^range_exp (the caller grew the range first); pos/neg hold 2^log2_bins counters each.
void BinFinite(FloatSpan values, float amax, int log2_bins, int range_exp, int64_t* pos,
               int64_t* neg, int64_t* zeros);

// Summarize and BinFinite in one pass over the data, for the steady state of calibration: after
// the first samples a tensor's range rarely grows, so its values already fit the histogram's
// range 2^range_exp. Bins (as BinFinite) every block of values that is finite and below
// 2^range_exp; at the first block that is not, a thread stops binning and only summarises the
// rest of its share, which is appended to *unbinned (at most one span per thread). Returns the
// Summary of all values. The caller grows the range (exact: docs/histogram-policy.md) and bins
// the unbinned spans, which gives the histogram two separate passes would.
Summary SummarizeAndBin(FloatSpan values, int log2_bins, int range_exp, int64_t* pos, int64_t* neg,
                        int64_t* zeros, std::vector<FloatSpan>* unbinned);

}  // namespace quantkit::quant::scan
