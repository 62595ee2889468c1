// pytorch-quantization MSE calibration (calibration-spec §3.3) in the CUDA kernel's float32
// arithmetic: centres c = (E[k] + E[k+1]) / 2 from float32 edges; for each candidate centre a,
// s = bound / a, q = clamp(rint(c s), -bound, bound) / s, mse = mean((q - c)^2 · H) with numpy's
// pairwise float32 sum; amax = the centre of the FIRST argmin (a centre, not an edge).
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {
namespace {
// fake_tensor_quant returns 0 for amax below this (tensor_quant_gpu.cu epsilon).
constexpr float kFakeQuantMinAmax = 1.0f / (1 << 24);
}  // namespace

Result<CalibResult> MseAmax(const Histogram& hist, const MseOptions& options) {
  const std::string bad = hist.Validate();
  QK_RETURN_IF_NOT(bad.empty(), StatusCode::kInvalidArgument, "mse calibration: {}", bad);
  QK_RETURN_IF_NOT(options.num_bits >= 2 && options.num_bits <= 16, StatusCode::kInvalidArgument,
                   "mse calibration: num_bits {} not in [2, 16]", options.num_bits);
  QK_RETURN_IF_NOT(options.stride >= 1, StatusCode::kInvalidArgument,
                   "mse calibration: stride < 1");
  const int64_t n = hist.num_bins();
  QK_RETURN_IF_NOT(options.start_bin >= 0 && options.start_bin < n, StatusCode::kInvalidArgument,
                   "mse calibration: start bin {} not in [0, {})", options.start_bin, n);
  std::vector<float> c(static_cast<size_t>(n)), w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const float e0 = static_cast<float>(hist.edges[static_cast<size_t>(k)]);
    const float e1 = static_cast<float>(hist.edges[static_cast<size_t>(k) + 1]);
    c[static_cast<size_t>(k)] = (e1 + e0) / 2.0f;
    w[static_cast<size_t>(k)] = static_cast<float>(hist.counts[static_cast<size_t>(k)]);
  }
  const float bound =
      static_cast<float>((1 << (options.num_bits - 1 + (options.is_unsigned ? 1 : 0))) - 1);
  const float min_bound = options.is_unsigned ? 0.0f : -bound;
  std::vector<float> err(static_cast<size_t>(n));
  CalibResult r;
  float best = std::numeric_limits<float>::infinity();
  int64_t best_i = options.start_bin;
  for (int64_t i = options.start_bin; i < n; i += options.stride) {
    const float a = c[static_cast<size_t>(i)];
    const float s = bound / a;
    for (int64_t k = 0; k < n; ++k) {
      const float x = c[static_cast<size_t>(k)];
      float q = 0.0f;
      if (a >= kFakeQuantMinAmax) q = std::clamp(std::rint(x * s), min_bound, bound) / s;
      const float d = q - x;
      err[static_cast<size_t>(k)] = d * d * w[static_cast<size_t>(k)];
    }
    // np.mean(float32): pairwise float32 sum, then divided by the count.
    const float mse = static_cast<float>(static_cast<double>(PairwiseSum(err.data(), n)) /
                                         static_cast<double>(n));
    r.candidate_threshold.push_back(a);
    r.candidate_score.push_back(mse);
    if (mse < best) {
      best = mse;
      best_i = i;
    }
  }
  r.index = best_i;
  r.amax = c[static_cast<size_t>(best_i)];
  r.lo = -r.amax;
  r.hi = r.amax;
  return r;
}

}  // namespace quantkit::quant
