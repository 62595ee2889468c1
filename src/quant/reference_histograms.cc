#include "quant/reference_histograms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"

namespace quantkit::quant {
namespace {

// numpy's PW_BLOCKSIZE and unroll factor (numpy/core/src/umath/loops_utils.h.src).
constexpr int64_t kPairwiseBlock = 128;
constexpr int64_t kPairwiseUnroll = 8;

template <typename T>
T PairwiseSumImpl(const T* a, int64_t n) {
  if (n < kPairwiseUnroll) {
    T res = 0;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    T r[kPairwiseUnroll];
    for (int64_t j = 0; j < kPairwiseUnroll; ++j) r[j] = a[j];
    int64_t i = kPairwiseUnroll;
    for (; i < n - (n % kPairwiseUnroll); i += kPairwiseUnroll) {
      for (int64_t j = 0; j < kPairwiseUnroll; ++j) r[j] += a[i + j];
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % kPairwiseUnroll;
  return PairwiseSumImpl(a, n2) + PairwiseSumImpl(a + n2, n - n2);
}

// Index of the bin holding v under E[k] <= v < E[k+1] (last bin closed), or -1 if outside.
inline int64_t FindBin(const std::vector<double>& e, double v) {
  const int64_t n = static_cast<int64_t>(e.size()) - 1;
  if (!(v >= e[0]) || !(v <= e[n])) return -1;
  const double width = e[n] - e[0];
  int64_t k = width > 0 ? static_cast<int64_t>((v - e[0]) / width * static_cast<double>(n)) : 0;
  k = std::clamp<int64_t>(k, 0, n - 1);
  // The estimate can be off by an ulp near an edge; the edges themselves decide (spec §9.1).
  while (k > 0 && v < e[k]) --k;
  while (k < n - 1 && v >= e[k + 1]) ++k;
  return k;
}

}  // namespace

float PairwiseSum(const float* values, int64_t n) { return PairwiseSumImpl(values, n); }
double PairwiseSum(const double* values, int64_t n) { return PairwiseSumImpl(values, n); }

std::vector<double> NumpyUniformEdgesF32(double lo, double hi, int64_t num_bins) {
  QK_CHECK(num_bins >= 1, "num_bins {} < 1", num_bins);
  std::vector<double> edges(static_cast<size_t>(num_bins) + 1);
  // numpy.linspace: step = (stop - start) / div; y = arange(num) * step + start; y[-1] = stop.
  const double start = lo, stop = hi;
  const double step = (stop - start) / static_cast<double>(num_bins);
  for (int64_t k = 0; k <= num_bins; ++k) {
    const double y = step != 0 ? static_cast<double>(k) * step + start
                               : static_cast<double>(k) * (stop - start) / num_bins + start;
    edges[static_cast<size_t>(k)] = static_cast<double>(static_cast<float>(y));
  }
  edges.back() = static_cast<double>(static_cast<float>(hi));
  return edges;
}

int64_t AccumulateOnEdges(FloatSpan values, bool absolute, Histogram* hist) {
  int64_t dropped = 0;
  for (float x : values) {
    const double v = absolute ? std::fabs(static_cast<double>(x)) : static_cast<double>(x);
    const int64_t k = FindBin(hist->edges, v);
    if (k < 0) {
      ++dropped;
    } else {
      ++hist->counts[static_cast<size_t>(k)];
    }
  }
  return dropped;
}

Histogram NumpyHistogram(FloatSpan values, int64_t num_bins, double lo, double hi, bool absolute) {
  QK_CHECK(lo <= hi, "range [{}, {}] is empty", lo, hi);
  if (lo == hi) {  // numpy widens an empty range by 0.5 on each side
    lo = static_cast<float>(lo - 0.5);
    hi = static_cast<float>(hi + 0.5);
  }
  Histogram h;
  h.counts.assign(static_cast<size_t>(num_bins), 0);
  h.edges = NumpyUniformEdgesF32(lo, hi, num_bins);
  h.edge_dtype = EdgeDType::kFloat32;
  for (float x : values) {
    const double v = absolute ? std::fabs(static_cast<double>(x)) : static_cast<double>(x);
    if (!(v >= lo && v <= hi)) continue;  // numpy's keep mask uses the range itself
    const int64_t k = FindBin(h.edges, v);
    if (k >= 0) ++h.counts[static_cast<size_t>(k)];
  }
  return h;
}

namespace {
void SignedRange(FloatSpan values, float* mn, float* mx) {
  *mn = std::numeric_limits<float>::infinity();
  *mx = -std::numeric_limits<float>::infinity();
  for (float v : values) {
    if (std::isnan(v)) continue;
    *mn = std::min(*mn, v);
    *mx = std::max(*mx, v);
  }
}
}  // namespace

Histogram PqAbsHistogram(FloatSpan values, int64_t num_bins) {
  float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
  for (float v : values) {
    if (std::isnan(v)) continue;
    lo = std::min(lo, std::fabs(v));
    hi = std::max(hi, std::fabs(v));
  }
  if (values.size == 0 || lo > hi) lo = hi = 0.0f;
  Histogram h = NumpyHistogram(values, num_bins, lo, hi, /*absolute=*/true);
  float mn = 0, mx = 0;
  SignedRange(values, &mn, &mx);
  h.observed_min = mn;
  h.observed_max = mx;
  return h;
}

Histogram SignedSymmetricHistogram(FloatSpan values, int64_t num_bins) {
  float mn = 0, mx = 0;
  SignedRange(values, &mn, &mx);
  if (mn > mx) mn = mx = 0.0f;
  const float t = std::max(std::fabs(mn), std::fabs(mx));
  Histogram h = NumpyHistogram(values, num_bins, -t, t, /*absolute=*/false);
  h.observed_min = mn;
  h.observed_max = mx;
  return h;
}

namespace {
// numpy's float64 floor_divide (npy_divmod): floor((a - fmod(a, b)) / b) with its rounding fix.
double NumpyFloorDivide(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}
}  // namespace

void OrtSignedStreamHistogram::Observe(FloatSpan batch) {
  if (batch.size == 0) return;
  float mn = 0, mx = 0;
  SignedRange(batch, &mn, &mx);
  const float t = std::max(std::fabs(mn), std::fabs(mx));  // np.float32
  if (empty_) {
    hist_ = NumpyHistogram(batch, num_bins_, -static_cast<double>(t), t, false);
    t_ = t;
    t_is_f32_ = true;
    empty_ = false;
    hist_.observed_min = mn;
    hist_.observed_max = mx;
    return;
  }
  const double old_t = t_;
  if (static_cast<double>(t) <= old_t) {
    const Histogram add = NumpyHistogram(batch, hist_.num_bins(), -old_t, old_t, false);
    for (size_t k = 0; k < hist_.counts.size(); ++k) hist_.counts[k] += add.counts[k];
  } else if (old_t == 0) {
    Histogram grown = NumpyHistogram(batch, hist_.num_bins(), -static_cast<double>(t), t, false);
    for (size_t k = 0; k < grown.counts.size(); ++k) grown.counts[k] += hist_.counts[k];
    grown.observed_min = hist_.observed_min;
    grown.observed_max = hist_.observed_max;
    hist_ = std::move(grown);
    t_ = t;
  } else {
    const int64_t old_bins = hist_.num_bins();
    const double stride = 2.0 * old_t / static_cast<double>(old_bins);  // float64 in numpy
    // t - old_t is a float32 subtraction while T is still an np.float32.
    const double diff = t_is_f32_ ? static_cast<double>(t - static_cast<float>(old_t))
                                  : static_cast<double>(t) - old_t;
    const int64_t half = static_cast<int64_t>(NumpyFloorDivide(diff, stride) + 1);
    const int64_t new_bins = old_bins + 2 * half;
    const double new_t = static_cast<double>(half) * stride + old_t;
    Histogram grown = NumpyHistogram(batch, new_bins, -new_t, new_t, false);
    for (int64_t k = 0; k < old_bins; ++k)
      grown.counts[static_cast<size_t>(half + k)] += hist_.counts[static_cast<size_t>(k)];
    grown.observed_min = hist_.observed_min;
    grown.observed_max = hist_.observed_max;
    hist_ = std::move(grown);
    t_ = new_t;
    t_is_f32_ = false;
  }
  hist_.observed_min = std::min(hist_.observed_min, static_cast<double>(mn));
  hist_.observed_max = std::max(hist_.observed_max, static_cast<double>(mx));
}

namespace {

// np.arange(start, stop, step) for numpy-scalar arguments promoted to a float64 array: the
// length ceil((stop - start) / step) and the second element start + step are computed in the
// arguments' own precision (float32 while the edges are float32), then DOUBLE_fill writes
// start + i * (a[1] - a[0]).
std::vector<double> NumpyArange(double start, double stop, double step, bool float32_args) {
  double span = 0, second = 0;
  if (float32_args) {
    const float s = static_cast<float>(start), e = static_cast<float>(stop),
                d = static_cast<float>(step);
    span = static_cast<double>((e - s) / d);
    second = static_cast<double>(s + d);
  } else {
    span = (stop - start) / step;
    second = start + step;
  }
  const double len = std::ceil(span);
  std::vector<double> out;
  if (!(len > 0)) return out;
  out.resize(static_cast<size_t>(len));
  out[0] = start;
  if (out.size() > 1) out[1] = second;
  const double delta = out.size() > 1 ? out[1] - out[0] : 0.0;
  for (size_t i = 2; i < out.size(); ++i) out[i] = start + static_cast<double>(i) * delta;
  return out;
}

}  // namespace

void AbsStreamHistogram::Observe(FloatSpan batch) {
  if (batch.size == 0) return;
  float mn = 0, mx = 0;
  SignedRange(batch, &mn, &mx);
  if (empty_) {
    hist_ = PqAbsHistogram(batch, num_bins_);
    empty_ = false;
    return;
  }
  float amax = 0.0f;
  for (float v : batch) amax = std::max(amax, std::fabs(v));
  std::vector<double>& e = hist_.edges;
  const bool f32 = hist_.edge_dtype == EdgeDType::kFloat32;
  if (static_cast<double>(amax) > e.back()) {
    // width, E[-1] + width and max + width in the edges' precision.
    double w, start, stop;
    if (f32) {
      const float wf = static_cast<float>(e[1]) - static_cast<float>(e[0]);
      w = wf;
      start = static_cast<float>(static_cast<float>(e.back()) + wf);
      stop = static_cast<float>(amax + wf);
    } else {
      w = e[1] - e[0];
      start = e.back() + w;
      stop = static_cast<double>(amax) + w;
    }
    const std::vector<double> more = NumpyArange(start, stop, w, f32);
    e.insert(e.end(), more.begin(), more.end());
    hist_.edge_dtype = EdgeDType::kFloat64;  // np.hstack with the float64 arange
  }
  // np.histogram(|x|, bins=E): E[k] <= v < E[k+1], last bin closed, outside dropped.
  std::vector<int64_t> old = std::move(hist_.counts);
  hist_.counts.assign(e.size() - 1, 0);
  AccumulateOnEdges(batch, /*absolute=*/true, &hist_);
  for (size_t k = 0; k < old.size(); ++k) hist_.counts[k] += old[k];
  if (flavor_ == AbsStreamFlavor::kOnnxRuntime) {
    for (double& x : e) x = static_cast<double>(static_cast<float>(x));
    hist_.edge_dtype = EdgeDType::kFloat32;
  }
  hist_.observed_min = std::min(hist_.observed_min, static_cast<double>(mn));
  hist_.observed_max = std::max(hist_.observed_max, static_cast<double>(mx));
}

}  // namespace quantkit::quant
