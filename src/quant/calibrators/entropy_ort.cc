// onnxruntime HistogramCollector.get_entropy_threshold (calibration-spec §2.3).
//
// Candidate i keeps bins [z-i, z+i+1) around the zero bin z = n/2 (one bin wider on the + side
// for even n); outliers fold into the end bins of P; the slice is merged into nq levels of
// m = len/nq bins (remainder counted in the last level); each level's count is divided by the
// number of non-zero P bins of the level with int64 truncation and written to all its bins
// (remainder bins keep Q = 0); P and Q are smoothed (eps 1e-4); D = KL in float32 (newer ORT) or
// float64 (older, scipy). The FIRST argmin wins and (E[s], E[e]) is clipped to the observed
// [min, max].
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"
#include "quant/calibrators/smoothing.h"

namespace quantkit::quant {

Result<CalibResult> OrtEntropyRange(const Histogram& hist, const OrtEntropyOptions& options) {
  const std::string bad = hist.Validate();
  QK_RETURN_IF_NOT(bad.empty(), StatusCode::kInvalidArgument, "entropy calibration: {}", bad);
  const int64_t n = hist.num_bins();
  const int64_t nq = options.num_quantized_bins;
  QK_RETURN_IF_NOT(nq >= 1 && nq / 2 <= n / 2, StatusCode::kInvalidArgument,
                   "entropy calibration: {} quantized bins do not fit {} histogram bins", nq, n);
  const std::vector<int64_t>& h = hist.counts;
  const int64_t z = n / 2, half = nq / 2;

  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int64_t j = 0; j < n; ++j)
    prefix[static_cast<size_t>(j) + 1] = prefix[static_cast<size_t>(j)] + h[static_cast<size_t>(j)];

  CalibResult r;
  std::vector<int64_t> p, q, qb(static_cast<size_t>(nq));
  std::vector<float> ps, qs;
  double best = std::numeric_limits<double>::infinity();
  int64_t best_i = half;
  for (int64_t i = half; i <= z; ++i) {
    const int64_t s = z - i, e = std::min(z + i + 1, n), len = e - s;
    p.assign(h.begin() + s, h.begin() + e);
    p.front() += prefix[static_cast<size_t>(s)];
    p.back() += prefix[static_cast<size_t>(n)] - prefix[static_cast<size_t>(e)];
    const int64_t m = len / nq;
    std::fill(qb.begin(), qb.end(), 0);
    for (int64_t k = 0; k < nq; ++k) {
      qb[static_cast<size_t>(k)] =
          prefix[static_cast<size_t>(s + (k + 1) * m)] - prefix[static_cast<size_t>(s + k * m)];
    }
    qb.back() += prefix[static_cast<size_t>(e)] - prefix[static_cast<size_t>(s + nq * m)];
    q.assign(static_cast<size_t>(len), 0);
    for (int64_t k = 0; k < nq; ++k) {
      int64_t norm = 0;
      for (int64_t j = k * m; j < (k + 1) * m; ++j) norm += (p[static_cast<size_t>(j)] != 0);
      if (norm == 0) continue;
      // numpy: int64 / int64 -> float64, stored into an int64 array -> truncation.
      const int64_t v = static_cast<int64_t>(static_cast<double>(qb[static_cast<size_t>(k)]) /
                                             static_cast<double>(norm));
      std::fill(q.begin() + k * m, q.begin() + (k + 1) * m, v);
    }
    double d = std::numeric_limits<double>::infinity();
    if (internal::SmoothNumpy(p, &ps) && internal::SmoothNumpy(q, &qs)) {
      d = internal::KlDivergence(ps, qs, options.kl);
    }
    r.candidate_threshold.push_back(hist.edges[static_cast<size_t>(e)]);
    r.candidate_score.push_back(d);
    if (d < best) {  // FIRST argmin
      best = d;
      best_i = i;
    }
  }
  const int64_t s = z - best_i, e = std::min(z + best_i + 1, n);
  float lo = static_cast<float>(hist.edges[static_cast<size_t>(s)]);
  float hi = static_cast<float>(hist.edges[static_cast<size_t>(e)]);
  if (!std::isnan(hist.observed_min) && lo < hist.observed_min)
    lo = static_cast<float>(hist.observed_min);
  if (!std::isnan(hist.observed_max) && hi > hist.observed_max)
    hi = static_cast<float>(hist.observed_max);
  r.lo = lo;
  r.hi = hi;
  r.amax = std::max(std::fabs(lo), std::fabs(hi));
  r.index = e;
  return r;
}

}  // namespace quantkit::quant
