// Shared pieces of the onnxruntime / MXNet KL searches: smooth_distribution and the KL sums.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "quant/calibrators/calibrators.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant::internal {

// onnxruntime quant_utils.smooth_distribution / MXNet 1.5 _smooth_distribution (numpy float32):
// zeros become eps, non-zeros lose eps1 = eps·n_zero/n_nonzero (computed in float64, applied as
// float32). Returns false when all entries are zero (the reference returns None / raises).
template <typename T>
bool SmoothNumpy(const std::vector<T>& p, std::vector<float>* out) {
  int64_t zeros = 0;
  for (const T& v : p) zeros += (v == 0);
  const int64_t nonzeros = static_cast<int64_t>(p.size()) - zeros;
  if (nonzeros == 0) return false;
  const double eps1 = kSmoothEps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  if (!(eps1 < 1.0)) return false;
  const float add_zero = static_cast<float>(kSmoothEps);
  const float add_nonzero = static_cast<float>(-eps1);
  out->resize(p.size());
  for (size_t j = 0; j < p.size(); ++j) {
    (*out)[j] = static_cast<float>(p[j]) + (p[j] == 0 ? add_zero : add_nonzero);
  }
  return true;
}

// KL(p/Σp || q/Σq) for positive (smoothed) inputs.
inline double KlDivergence(const std::vector<float>& p, const std::vector<float>& q,
                           KlPrecision precision) {
  const int64_t n = static_cast<int64_t>(p.size());
  if (precision == KlPrecision::kFloat32) {
    // onnxruntime's in-tree entropy: float32 normalisation, log and pairwise sum.
    const float sp = PairwiseSum(p.data(), n), sq = PairwiseSum(q.data(), n);
    std::vector<float> vec(p.size());
    float last_p = -1.f, last_q = -1.f, last = 0.f;  // equal inputs -> equal term (no log)
    for (size_t j = 0; j < p.size(); ++j) {
      const float pk = p[j] / sp, qk = q[j] / sq;
      if (pk != last_p || qk != last_q) {
        last_p = pk;
        last_q = qk;
        last = (pk > 0 && qk > 0) ? pk * std::log(pk / qk)
               : (pk == 0 && qk >= 0) ? 0.0f : std::numeric_limits<float>::infinity();
      }
      vec[j] = last;
    }
    return PairwiseSum(vec.data(), n);
  }
  std::vector<double> pd(p.begin(), p.end()), qd(q.begin(), q.end());
  const double sp = PairwiseSum(pd.data(), n), sq = PairwiseSum(qd.data(), n);
  std::vector<double> vec(p.size());
  double last_p = -1.0, last_q = -1.0, last = 0.0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double pk = pd[j] / sp, qk = qd[j] / sq;
    if (pk != last_p || qk != last_q) {
      last_p = pk;
      last_q = qk;
      last = (pk > 0 && qk > 0) ? pk * std::log(pk / qk)
             : (pk == 0 && qk >= 0) ? 0.0 : std::numeric_limits<double>::infinity();
    }
    vec[j] = last;
  }
  return PairwiseSum(vec.data(), n);
}

}  // namespace quantkit::quant::internal
