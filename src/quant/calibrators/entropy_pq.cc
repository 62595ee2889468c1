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
// That is O(L) per candidate; the level terms are tabulated once and read through an offset
// table (see PqEntropyState), so the hot loop is one load and one add per level. Since a different
// summation order could reorder near-equal values (and TV1 has exact ties at D = 0), every
// candidate within kRefineTolerance of the fast minimum is re-evaluated with the reference's
// float64 arithmetic and numpy's pairwise summation, and the tie rule is applied to those exact
// values.
#include <algorithm>
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
// Upper bound of the level-term tables (entries of 8 bytes); beyond it (few levels and very many
// bins) each level's logarithm is computed directly.
constexpr int64_t kMaxTableEntries = int64_t{1} << 22;
constexpr int64_t kMaxOffsetLevels = 1024;

struct PqEntropyState {
  std::vector<int64_t> bins;    // H with H[0] := H[1]
  std::vector<int64_t> prefix;  // prefix[m] = Σ_{j<m} bins[j]
  std::vector<int64_t> prefix_nz;
  std::vector<double> prefix_plogp;
  int64_t total = 0;
  int64_t levels = 0;
  int level_shift = 0;  // levels = 2^level_shift
  // Level terms: T_d[a] = S log(S / nz) for the level covering bins [a, a + d) (0 when S = 0).
  // Candidate i = qL + r has levels of widths q and q + 1 only, so its sum reads two rows; they
  // are interleaved, pair_q[2a + w] = T_{q+w}[a], which makes a level's term pair_q[a + b - q]
  // for a level [a, b): one add per level in the hot loop. Each T entry is one logarithm,
  // computed in a branch-free pass (21k logs for 2048 bins) instead of a memo lookup with a
  // miss test in the hot loop. Empty when the table would be too large (direct logs then).
  int64_t min_q = 0;
  std::vector<int64_t> pair_offset;  // by q - min_q, into pairs
  std::vector<double> pairs;
  // Level boundaries of candidate i = qL + r are a_k = kq + c_k(r), c_k(r) = ceil(k r / L), so
  // a level's pair index a_k + a_{k+1} - q = 2kq + e_k(r) with e_k(r) = c_k(r) + c_{k+1}(r):
  // a table of L x L offsets (for L <= kMaxOffsetLevels) leaves one load and one add per level.
  std::vector<int32_t> offsets;
};

double LevelLog(const PqEntropyState& s, int64_t a, int64_t b) {
  const int64_t sum = s.prefix[static_cast<size_t>(b)] - s.prefix[static_cast<size_t>(a)];
  const int64_t nz = s.prefix_nz[static_cast<size_t>(b)] - s.prefix_nz[static_cast<size_t>(a)];
  return std::log(static_cast<double>(sum) / static_cast<double>(nz));
}

void BuildTermTable(PqEntropyState& s, int64_t start_bin, int64_t n) {
  const int shift = s.level_shift;
  s.min_q = start_bin >> shift;
  const int64_t max_q = n >> shift;
  // Row d serves candidates with q = d (narrow levels) and q = d - 1 (wide levels), i.e.
  // i < (d + 1) L, whose levels start at a <= i - d; pair row q spans a < min(n, (q+1) L) + 1.
  auto row_len = [&](int64_t q) { return std::min(n, (q + 1) << shift) + 1; };
  int64_t entries = 0;
  for (int64_t q = s.min_q; q <= max_q; ++q) entries += 2 * row_len(q);
  if (entries > kMaxTableEntries) return;
  std::vector<double> prev(static_cast<size_t>(n) + 1), cur(static_cast<size_t>(n) + 1);
  auto fill_row = [&](int64_t d, std::vector<double>& row) {
    std::fill(row.begin(), row.end(), 0.0);
    const int64_t last_a = std::min(n - d, ((d + 1) << shift) - 1 - d);
    for (int64_t a = 0; a <= last_a; ++a) {
      const int64_t sum = s.prefix[static_cast<size_t>(a + d)] - s.prefix[static_cast<size_t>(a)];
      if (sum != 0) row[static_cast<size_t>(a)] = static_cast<double>(sum) * LevelLog(s, a, a + d);
    }
  };
  if (s.levels <= kMaxOffsetLevels) {
    const int64_t L = s.levels;
    s.offsets.resize(static_cast<size_t>(L * L));
    for (int64_t r = 0; r < L; ++r) {
      for (int64_t k = 0; k < L; ++k) {
        const int64_t c0 = (k * r + L - 1) >> shift, c1 = ((k + 1) * r + L - 1) >> shift;
        s.offsets[static_cast<size_t>(r * L + k)] = static_cast<int32_t>(c0 + c1);
      }
    }
  }
  s.pairs.assign(static_cast<size_t>(entries), 0.0);
  s.pair_offset.clear();
  fill_row(s.min_q, prev);
  int64_t offset = 0;
  for (int64_t q = s.min_q; q <= max_q; ++q) {
    fill_row(q + 1, cur);
    s.pair_offset.push_back(offset);
    double* pair = s.pairs.data() + offset;
    const int64_t len = row_len(q);
    for (int64_t a = 0; a < len; ++a) {
      pair[2 * a] = prev[static_cast<size_t>(a)];
      pair[2 * a + 1] = cur[static_cast<size_t>(a)];
    }
    offset += 2 * len;
    std::swap(prev, cur);
  }
}

// ΣP·D(i) up to the constant terms, O(L) per candidate.
double FastDivergence(const PqEntropyState& s, int64_t i) {
  const int64_t outliers = s.total - s.prefix[static_cast<size_t>(i)];
  const int64_t last = s.bins[static_cast<size_t>(i - 1)];
  const int64_t q_total = s.prefix[static_cast<size_t>(i)];
  if (q_total == 0) return kInf;               // Q all zero
  if (last == 0 && outliers > 0) return kInf;  // P > 0 where Q == 0
  const double p_last = static_cast<double>(last + outliers);
  const double plogp =
      s.prefix_plogp[static_cast<size_t>(i - 1)] + (p_last > 0 ? p_last * std::log(p_last) : 0.0);
  // Level k covers bins [ceil(k i / L), ceil((k+1) i / L)); L is a power of two (shift, no idiv).
  const int64_t round_up = s.levels - 1;
  const int64_t last_start = ((s.levels - 1) * i + round_up) >> s.level_shift;
  double plogq = 0.0;
  if (!s.pairs.empty()) {
    const int64_t q = i >> s.level_shift;
    // pair[a + b] with the - q folded into the base pointer (may point before the row start
    // only in address arithmetic: a + b - q >= 2a >= 0 for every level read).
    const double* pair = s.pairs.data() + s.pair_offset[static_cast<size_t>(q - s.min_q)];
    if (!s.offsets.empty()) {
      const int64_t L = s.levels;
      const int32_t* e = s.offsets.data() + (i & (L - 1)) * L;
      const double* p = pair;  // pair + 2kq: the level index is then e[k]
      const int64_t step = 2 * q;
      double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;
      int64_t k = 0;
      for (; k + 4 <= L; k += 4, p += 4 * step) {
        acc0 += p[e[k]];
        acc1 += p[step + e[k + 1]];
        acc2 += p[2 * step + e[k + 2]];
        acc3 += p[3 * step + e[k + 3]];
      }
      for (; k < L; ++k, p += step) acc0 += p[e[k]];
      plogq = (acc0 + acc1) + (acc2 + acc3);
    } else {
      double acc0 = 0.0, acc1 = 0.0;
      int64_t a = 0, num = i + round_up;
      const int shift = s.level_shift;
      int64_t k = 0;
      for (; k + 2 <= s.levels; k += 2) {
        const int64_t b0 = num >> shift;
        const int64_t b1 = (num + i) >> shift;
        num += 2 * i;
        acc0 += pair[a + b0 - q];
        acc1 += pair[b0 + b1 - q];
        a = b1;
      }
      if (k < s.levels) acc0 += pair[a + (num >> shift) - q];  // L = 1
      plogq = acc0 + acc1;
    }
  } else {
    int64_t a = 0;
    for (int64_t k = 0; k < s.levels; ++k) {
      const int64_t b = ((k + 1) * i + round_up) >> s.level_shift;
      const int64_t sum = s.prefix[static_cast<size_t>(b)] - s.prefix[static_cast<size_t>(a)];
      if (sum != 0) plogq += static_cast<double>(sum) * LevelLog(s, a, b);
      a = b;
    }
  }
  // The outliers are folded into the last level's P (not into its Q average).
  if (outliers > 0) plogq += static_cast<double>(outliers) * LevelLog(s, last_start, i);
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
    if (pk > 0 && qk > 0)
      vec[static_cast<size_t>(j)] = pk * std::log(pk / qk);
    else if (pk == 0 && qk >= 0)
      vec[static_cast<size_t>(j)] = 0.0;
    else
      vec[static_cast<size_t>(j)] = kInf;
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
  BuildTermTable(s, options.start_bin, n);

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
