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

// KL(p/Σp || q/Σq) with scipy's rel_entr rules in precision T: normalisation, log and numpy's
// pairwise sums all in T. Equal consecutive (p, q) pairs (the smoothed empty bins of sparse
// histograms) reuse the previous term: same inputs, same value, far fewer logs.
template <typename T>
double KlDivergenceIn(const std::vector<float>& p, const std::vector<float>& q) {
  const int64_t n = static_cast<int64_t>(p.size());
  std::vector<T> pt(p.begin(), p.end()), qt(q.begin(), q.end());
  const T sp = PairwiseSum(pt.data(), n), sq = PairwiseSum(qt.data(), n);
  std::vector<T> vec(p.size());
  T last_p = -1, last_q = -1, last = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const T pk = pt[j] / sp, qk = qt[j] / sq;
    if (pk != last_p || qk != last_q) {
      last_p = pk;
      last_q = qk;
      last = (pk > 0 && qk > 0)     ? pk * std::log(pk / qk)
             : (pk == 0 && qk >= 0) ? T(0)
                                    : std::numeric_limits<T>::infinity();
    }
    vec[j] = last;
  }
  return static_cast<double>(PairwiseSum(vec.data(), n));
}

// kFloat32: onnxruntime's in-tree entropy (newer releases); kFloat64: scipy.stats.entropy.
inline double KlDivergence(const std::vector<float>& p, const std::vector<float>& q,
                           KlPrecision precision) {
  return precision == KlPrecision::kFloat32 ? KlDivergenceIn<float>(p, q)
                                            : KlDivergenceIn<double>(p, q);
}

}  // namespace quantkit::quant::internal
