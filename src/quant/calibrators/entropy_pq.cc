// pytorch-quantization entropy calibration (calibration-spec §2.2) and the TensorRT-style
// (i + 0.5)·w threshold (§2.1).
//
// Reference loop, per candidate i (number of kept bins): P = H[0..i) with the outliers sum(H[i:])
// folded into P[i-1]; bins are grouped into L levels by g(j) = floor(j L / i); Q spreads each
// level's count evenly over its non-empty bins; D(i) = KL(P/ΣP || Q/ΣQ) in float64; the LAST
// argmin wins; amax = E[i*]. Done literally this is O(n^2) logs (~2M for 2048 bins).
//
// Fast path: with S_k = Σ_{level k} H, nz_k its non-empty bins and C_i = Σ_{j<i} H,
//   ΣP·D = Σ P log P - Σ_k S'_k log(S_k / nz_k) - ΣP log ΣP + ΣP log C_i
// where Σ P log P comes from a prefix sum, and S'_k = S_k except the last level (+ outliers).
// That is O(L) per candidate. Since a different summation order could reorder near-equal
// values (and TV1 has exact ties at D = 0), every candidate within kRefineTolerance of the
// fast minimum is re-evaluated with the reference's float64 arithmetic and numpy's pairwise
// summation, and the tie rule is applied to those exact values.
#include <cmath>
#include <limits>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {
namespace {

// Fast-path values differ from the reference by ~1e-13; anything this close to the minimum is
// recomputed exactly.
constexpr double kRefineTolerance = 1e-9;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Upper bound of the log memo (entries of 8 bytes); beyond it (few levels and very many bins)
// logarithms are computed directly.
constexpr int64_t kMaxMemoEntries = int64_t{1} << 22;

struct PqEntropyState {
  std::vector<int64_t> bins;    // H with H[0] := H[1]
  std::vector<int64_t> prefix;  // prefix[m] = Σ_{j<m} bins[j]
  std::vector<int64_t> prefix_nz;
  std::vector<double> prefix_plogp;
  int64_t total = 0;
  int64_t levels = 0;
  int level_shift = 0;  // levels = 2^level_shift
  // Memo of log(S / nz) for a level covering bins [a, a + d). Every candidate has levels of only
  // two widths (floor and ceil of i/L), so over the whole search there are at most
  // ~(n+1)·(n/L + 2) distinct levels (35k for 2048 bins) against ~n·L level evaluations: each
  // logarithm is computed once. NaN = not computed yet.
  int64_t memo_stride = 0;
  std::vector<double> memo_log;
};

double FastDivergence(PqEntropyState& s, int64_t i) {  // mutates the memo only
  const int64_t outliers = s.total - s.prefix[static_cast<size_t>(i)];
  const int64_t last = s.bins[static_cast<size_t>(i - 1)];
  const int64_t q_total = s.prefix[static_cast<size_t>(i)];
  if (q_total == 0) return kInf;                  // Q all zero
  if (last == 0 && outliers > 0) return kInf;     // P > 0 where Q == 0
  const double p_last = static_cast<double>(last + outliers);
  double plogp = s.prefix_plogp[static_cast<size_t>(i - 1)] +
                 (p_last > 0 ? p_last * std::log(p_last) : 0.0);
  double plogq_even = 0.0, plogq_odd = 0.0;  // two chains: half the add latency
  // Level k covers bins [ceil(k i / L), ceil((k+1) i / L)); L is a power of two (shift, no idiv).
  const int64_t round_up = s.levels - 1;
  const int64_t* prefix = s.prefix.data();
  double* memo = s.memo_log.empty() ? nullptr : s.memo_log.data();
  int64_t a = 0, prefix_a = 0;  // prefix[a] carried from the previous level
  for (int64_t k = 0; k < s.levels; ++k) {
    const int64_t b = ((k + 1) * i + round_up) >> s.level_shift;
    const int64_t prefix_b = prefix[b];
    const int64_t sum = prefix_b - prefix_a;  // 0 also when the level is empty (a == b)
    if (sum != 0) {
      double* slot = memo ? memo + (b - a) * s.memo_stride + a : nullptr;
      double lq = slot ? *slot : std::numeric_limits<double>::quiet_NaN();
      if (std::isnan(lq)) {
        const int64_t nz = s.prefix_nz[static_cast<size_t>(b)] - s.prefix_nz[static_cast<size_t>(a)];
        lq = std::log(static_cast<double>(sum) / static_cast<double>(nz));
        if (slot) *slot = lq;
      }
      const double term = static_cast<double>(b == i ? sum + outliers : sum) * lq;
      if (k & 1) {
        plogq_odd += term;
      } else {
        plogq_even += term;
      }
    }
    a = b;
    prefix_a = prefix_b;
  }
  const double plogq = plogq_even + plogq_odd;
  const double sp = static_cast<double>(s.total);
  return (plogp - plogq) / sp - std::log(sp) + std::log(static_cast<double>(q_total));
}

// The reference arithmetic: float64 Q, scipy.stats.entropy with numpy pairwise sums.
double ExactDivergence(const PqEntropyState& s, int64_t i) {
  std::vector<double> level_sum(static_cast<size_t>(s.levels), 0.0);
  std::vector<int64_t> level_nz(static_cast<size_t>(s.levels), 0);
  for (int64_t j = 0; j < i; ++j) {
    const int64_t h = s.bins[static_cast<size_t>(j)];
    if (h == 0) continue;
    const int64_t g = j * s.levels / i;
    level_sum[static_cast<size_t>(g)] += static_cast<double>(h);
    ++level_nz[static_cast<size_t>(g)];
  }
  for (int64_t k = 0; k < s.levels; ++k) {
    if (level_nz[static_cast<size_t>(k)] > 0) {
      level_sum[static_cast<size_t>(k)] /= static_cast<double>(level_nz[static_cast<size_t>(k)]);
    }
  }
  std::vector<double> q(static_cast<size_t>(i), 0.0), p(static_cast<size_t>(i));
  for (int64_t j = 0; j < i; ++j) {
    const int64_t h = s.bins[static_cast<size_t>(j)];
    if (h != 0) q[static_cast<size_t>(j)] = level_sum[static_cast<size_t>(j * s.levels / i)];
    p[static_cast<size_t>(j)] = static_cast<double>(h);
  }
  p.back() += static_cast<double>(s.total - s.prefix[static_cast<size_t>(i)]);
  const double sp = static_cast<double>(s.total);  // int64 sum, exact
  const double sq = PairwiseSum(q.data(), i);
  std::vector<double> vec(static_cast<size_t>(i));
  for (int64_t j = 0; j < i; ++j) {
    const double pk = p[static_cast<size_t>(j)] / sp, qk = q[static_cast<size_t>(j)] / sq;
    // scipy.special.rel_entr
    if (pk > 0 && qk > 0) vec[static_cast<size_t>(j)] = pk * std::log(pk / qk);
    else if (pk == 0 && qk >= 0) vec[static_cast<size_t>(j)] = 0.0;
    else vec[static_cast<size_t>(j)] = kInf;
  }
  return PairwiseSum(vec.data(), i);
}

}  // namespace

Result<CalibResult> EntropyAmax(const Histogram& hist, const EntropyOptions& options) {
  const std::string bad = hist.Validate();
  QK_RETURN_IF_NOT(bad.empty(), StatusCode::kInvalidArgument, "entropy calibration: {}", bad);
  QK_RETURN_IF_NOT(options.num_bits >= 2 && options.num_bits <= 16, StatusCode::kInvalidArgument,
                   "entropy calibration: num_bits {} not in [2, 16]", options.num_bits);
  QK_RETURN_IF_NOT(options.stride >= 1, StatusCode::kInvalidArgument,
                   "entropy calibration: stride {} < 1", options.stride);
  const int64_t n = hist.num_bins();
  QK_RETURN_IF_NOT(options.start_bin >= 1 && options.start_bin <= n, StatusCode::kInvalidArgument,
                   "entropy calibration: start bin {} not in [1, {}] (histogram has {} bins)",
                   options.start_bin, n, n);
  PqEntropyState s;
  s.bins = hist.counts;
  if (n >= 2) s.bins[0] = s.bins[1];  // the reference discards the (usually huge) zero bin
  s.level_shift = options.num_bits - 1 + (options.is_unsigned ? 1 : 0);
  s.levels = int64_t{1} << s.level_shift;
  // Rows by width, columns by start: a candidate walks two rows left to right (cache friendly).
  s.memo_stride = n + 1;
  const int64_t widths = (n + s.levels - 1) / s.levels + 2;  // 0 .. ceil(n/L) + 1
  if (widths * s.memo_stride <= kMaxMemoEntries) {
    s.memo_log.assign(static_cast<size_t>(widths * s.memo_stride),
                      std::numeric_limits<double>::quiet_NaN());
  }
  s.prefix.assign(static_cast<size_t>(n) + 1, 0);
  s.prefix_nz.assign(static_cast<size_t>(n) + 1, 0);
  s.prefix_plogp.assign(static_cast<size_t>(n) + 1, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t h = s.bins[static_cast<size_t>(j)];
    s.prefix[static_cast<size_t>(j) + 1] = s.prefix[static_cast<size_t>(j)] + h;
    s.prefix_nz[static_cast<size_t>(j) + 1] = s.prefix_nz[static_cast<size_t>(j)] + (h != 0);
    s.prefix_plogp[static_cast<size_t>(j) + 1] =
        s.prefix_plogp[static_cast<size_t>(j)] +
        (h > 0 ? static_cast<double>(h) * std::log(static_cast<double>(h)) : 0.0);
  }
  s.total = s.prefix.back();
  QK_RETURN_IF_NOT(s.total > 0, StatusCode::kInvalidArgument,
                   "entropy calibration: the histogram is empty");

  CalibResult r;
  double best = kInf;
  for (int64_t i = options.start_bin; i <= n; i += options.stride) {
    const double d = FastDivergence(s, i);
    r.candidate_threshold.push_back(hist.edges[static_cast<size_t>(i)]);
    r.candidate_score.push_back(d);
    if (d < best) best = d;
  }
  // Exact re-evaluation near the minimum, then the LAST argmin (ties go to the larger i).
  size_t chosen = r.candidate_score.size() - 1;
  if (std::isfinite(best)) {
    const double limit = best + kRefineTolerance * std::max(1.0, std::fabs(best));
    double exact_best = kInf;
    for (size_t c = 0; c < r.candidate_score.size(); ++c) {
      if (!(r.candidate_score[c] <= limit)) continue;
      const int64_t i = options.start_bin + static_cast<int64_t>(c) * options.stride;
      const double d = ExactDivergence(s, i);
      r.candidate_score[c] = d;
      if (d <= exact_best) {
        exact_best = d;
        chosen = c;
      }
    }
  }
  const int64_t i_star = options.start_bin + static_cast<int64_t>(chosen) * options.stride;
  r.index = i_star;
  if (options.rule == EntropyThresholdRule::kLeftEdge) {
    r.amax = static_cast<float>(hist.edges[static_cast<size_t>(i_star)]);
  } else {
    const double width = (hist.edges.back() - hist.edges.front()) / static_cast<double>(n);
    r.amax = static_cast<float>(hist.edges.front() + (static_cast<double>(i_star) + 0.5) * width);
  }
  r.lo = -r.amax;
  r.hi = r.amax;
  return r;
}

}  // namespace quantkit::quant
