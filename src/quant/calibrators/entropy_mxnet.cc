// MXNet / TVM KL minimisation (calibration-spec §2.4, §2.5) on a signed histogram with an odd
// number of bins; candidate i keeps [z-i, z+i+1), z = n/2, and returns the edge E[z+i+1].
//
// kCpp (MXNet >= 1.6 calibrate.cc, TVM relay MinimizeKL, "adapted from MXNet"): float32
// throughout with sequential sums; the first slice bin goes only into P[0] (its copy used for Q
// is zero); Q is written only where P != 0; the last level runs to the end of the slice;
// smoothing in float32; first argmin.
// kMxnet15 (MXNet 1.4-1.5 python): int64 P with outliers, Q from the whole slice as float
// division, Q[P == 0] = 0, numpy float32 smoothing, float64 KL; first argmin.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"
#include "quant/calibrators/smoothing.h"

namespace quantkit::quant {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();

// calibrate.cc SmoothDistribution: eps and eps1 in float32; empty result = malformed.
bool SmoothCpp(std::vector<float>* p) {
  const float eps = static_cast<float>(kSmoothEps);
  size_t zeros = 0;
  for (float v : *p) zeros += (v == 0.f);
  const size_t nonzeros = p->size() - zeros;
  if (nonzeros == 0) return false;
  const float eps1 = eps * static_cast<float>(zeros) / static_cast<float>(nonzeros);
  if (eps1 >= 1.0f) return false;
  for (float& v : *p) {
    const bool z = (v == 0.f);
    v += eps * static_cast<float>(z) - eps1 * static_cast<float>(!z);
  }
  return true;
}

// calibrate.cc ComputeEntropy: float32 sequential sums.
float EntropyCpp(std::vector<float>* p, std::vector<float>* q) {
  float p_sum = 0.f, q_sum = 0.f;
  for (float v : *p) p_sum += v;
  for (float v : *q) q_sum += v;
  float ret = 0.f;
  // Runs of equal (p, q) pairs (the smoothed empty bins of sparse histograms) reuse the last term:
  // the same inputs give the same float, so the sequential sum is unchanged and most logs vanish.
  float last_p = -1.f, last_q = -1.f, last_term = 0.f;
  for (size_t i = 0; i < p->size(); ++i) {
    (*p)[i] /= p_sum;
    (*q)[i] /= q_sum;
    const float pi = (*p)[i], qi = (*q)[i];
    if (pi == 0.f || qi == 0.f) continue;
    if (pi != last_p || qi != last_q) {
      last_p = pi;
      last_q = qi;
      last_term = pi * std::log(pi / qi);
    }
    ret += last_term;
  }
  return ret;
}

double DivergenceCpp(const std::vector<int64_t>& hist, int64_t s, int64_t e, int64_t nq) {
  const int64_t n = static_cast<int64_t>(hist.size()), len = e - s;
  std::vector<int64_t> sliced(static_cast<size_t>(len), 0);
  std::vector<float> p(static_cast<size_t>(len), 0.f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = hist[static_cast<size_t>(j)];
    if (j <= s) {
      p[0] += static_cast<float>(v);
    } else if (j >= e) {
      p.back() += static_cast<float>(v);
    } else {
      sliced[static_cast<size_t>(j - s)] = v;
      p[static_cast<size_t>(j - s)] = static_cast<float>(v);
    }
  }
  const int64_t m = len / nq;
  std::vector<float> qb(static_cast<size_t>(nq));
  for (int64_t j = 0; j < nq; ++j) {
    qb[static_cast<size_t>(j)] = static_cast<float>(
        std::accumulate(sliced.begin() + j * m, sliced.begin() + (j + 1) * m, int64_t{0}));
  }
  qb.back() +=
      static_cast<float>(std::accumulate(sliced.begin() + nq * m, sliced.end(), int64_t{0}));
  std::vector<float> q(static_cast<size_t>(len), 0.f);
  for (int64_t j = 0; j < nq; ++j) {
    const int64_t start = j * m, stop = (j == nq - 1) ? len : (j + 1) * m;
    const auto norm = std::count_if(sliced.begin() + start, sliced.begin() + stop,
                                    [](int64_t v) { return v != 0; });
    if (norm == 0) continue;
    for (int64_t k = start; k < stop; ++k) {
      if (p[static_cast<size_t>(k)] != 0.f) {
        q[static_cast<size_t>(k)] = qb[static_cast<size_t>(j)] / static_cast<float>(norm);
      }
    }
  }
  if (!SmoothCpp(&p) || !SmoothCpp(&q)) return kInfF;
  return EntropyCpp(&p, &q);
}

double DivergenceMxnet15(const std::vector<int64_t>& hist, const std::vector<int64_t>& prefix,
                         int64_t s, int64_t e, int64_t nq) {
  const int64_t n = static_cast<int64_t>(hist.size()), len = e - s;
  std::vector<int64_t> p(hist.begin() + s, hist.begin() + e);
  p.front() += prefix[static_cast<size_t>(s)];
  p.back() += prefix[static_cast<size_t>(n)] - prefix[static_cast<size_t>(e)];
  const int64_t m = len / nq;
  std::vector<float> q(static_cast<size_t>(len), 0.f);
  for (int64_t j = 0; j < nq; ++j) {
    const int64_t start = j * m, stop = (j == nq - 1) ? len : start + m;
    int64_t qb =
        prefix[static_cast<size_t>(s + (j + 1) * m)] - prefix[static_cast<size_t>(s + start)];
    if (j == nq - 1) qb += prefix[static_cast<size_t>(e)] - prefix[static_cast<size_t>(s + nq * m)];
    int64_t norm = 0;
    for (int64_t k = start; k < stop; ++k) norm += (p[static_cast<size_t>(k)] != 0);
    if (norm == 0) continue;
    const float v = static_cast<float>(static_cast<double>(qb) / static_cast<double>(norm));
    std::fill(q.begin() + start, q.begin() + stop, v);
  }
  for (int64_t k = 0; k < len; ++k) {
    if (p[static_cast<size_t>(k)] == 0) q[static_cast<size_t>(k)] = 0.f;
  }
  std::vector<float> ps, qs;
  if (!internal::SmoothNumpy(p, &ps) || !internal::SmoothNumpy(q, &qs)) {
    return std::numeric_limits<double>::infinity();
  }
  return internal::KlDivergence(ps, qs, KlPrecision::kFloat64);
}

}  // namespace

Result<CalibResult> MinimizeKlThreshold(const Histogram& hist, const MinimizeKlOptions& options) {
  const std::string bad = hist.Validate();
  QK_RETURN_IF_NOT(bad.empty(), StatusCode::kInvalidArgument, "entropy calibration: {}", bad);
  const int64_t n = hist.num_bins(), nq = options.num_quantized_bins;
  QK_RETURN_IF_NOT(n % 2 == 1, StatusCode::kInvalidArgument,
                   "MinimizeKL needs an odd number of bins, got {}", n);
  QK_RETURN_IF_NOT(nq >= 1 && nq / 2 <= n / 2, StatusCode::kInvalidArgument,
                   "MinimizeKL: {} quantized bins do not fit {} histogram bins", nq, n);
  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int64_t j = 0; j < n; ++j) {
    prefix[static_cast<size_t>(j) + 1] =
        prefix[static_cast<size_t>(j)] + hist.counts[static_cast<size_t>(j)];
  }
  const int64_t z = n / 2;
  CalibResult r;
  double best = std::numeric_limits<double>::infinity();
  int64_t best_e = z + nq / 2 + 1;
  for (int64_t i = nq / 2; i <= z; ++i) {
    const int64_t s = z - i, e = z + i + 1;
    const double d = options.variant == MinimizeKlVariant::kCpp
                         ? DivergenceCpp(hist.counts, s, e, nq)
                         : DivergenceMxnet15(hist.counts, prefix, s, e, nq);
    r.candidate_threshold.push_back(hist.edges[static_cast<size_t>(e)]);
    r.candidate_score.push_back(d);
    if (d < best) {
      best = d;
      best_e = e;
    }
  }
  r.index = best_e;
  r.amax = static_cast<float>(hist.edges[static_cast<size_t>(best_e)]);
  r.lo = -r.amax;
  r.hi = r.amax;
  return r;
}

}  // namespace quantkit::quant
