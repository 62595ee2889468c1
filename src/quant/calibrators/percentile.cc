// Percentile calibration (calibration-spec §3.2). Both pytorch-quantization and onnxruntime build
// the cdf as np.cumsum(H / total): a running float64 sum of per-bin fractions, then take the
// first index with cdf >= p/100 (np.searchsorted, side='left') and return the LEFT edge of that
// bin. The running sum can stay below 1 - 1e-5 at the bin where the exact count crosses it (TV2:
// 99.999 % gives bin 2047, not 1638); `exact_count_cdf` selects prefix_count/total instead.
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"

namespace quantkit::quant {
namespace {

std::vector<double> Cdf(const Histogram& hist, bool exact_count) {
  const int64_t total = hist.Total();
  std::vector<double> cdf(hist.counts.size());
  double running = 0.0;
  int64_t prefix = 0;
  for (size_t k = 0; k < cdf.size(); ++k) {
    if (exact_count) {
      prefix += hist.counts[k];
      cdf[k] = static_cast<double>(prefix) / static_cast<double>(total);
    } else {
      running += static_cast<double>(hist.counts[k]) / static_cast<double>(total);
      cdf[k] = running;
    }
  }
  return cdf;
}

// np.searchsorted(cdf, v, side='left'): first k with cdf[k] >= v, or cdf.size().
int64_t SearchSortedLeft(const std::vector<double>& cdf, double v) {
  return static_cast<int64_t>(std::lower_bound(cdf.begin(), cdf.end(), v) - cdf.begin());
}

}  // namespace

Result<CalibResult> PercentileAmax(const Histogram& hist, const PercentileOptions& options) {
  const std::string bad = hist.Validate();
  QK_RETURN_IF_NOT(bad.empty(), StatusCode::kInvalidArgument, "percentile calibration: {}", bad);
  QK_RETURN_IF_NOT(options.percentile >= 0.0 && options.percentile <= 100.0,
                   StatusCode::kInvalidArgument, "percentile {} is not in [0, 100]",
                   options.percentile);
  QK_RETURN_IF_NOT(hist.Total() > 0, StatusCode::kInvalidArgument,
                   "percentile calibration: the histogram is empty");
  const std::vector<double> cdf = Cdf(hist, options.exact_count_cdf);
  CalibResult r;
  r.candidate_threshold.assign(hist.edges.begin(), hist.edges.end() - 1);
  r.candidate_score = cdf;
  auto edge = [&](int64_t k) { return static_cast<float>(hist.edges[static_cast<size_t>(k)]); };
  float lo = 0, hi = 0;
  if (options.flavor == PercentileFlavor::kOrtAsymmetric) {
    const double cut = (100.0 - options.percentile) / 200.0;
    const int64_t right = SearchSortedLeft(cdf, 1.0 - cut);
    const int64_t left = SearchSortedLeft(cdf, cut);
    lo = edge(left);
    hi = edge(right);
    r.index = right;
  } else {
    r.index = SearchSortedLeft(cdf, options.percentile / 100.0);
    hi = edge(r.index);
    lo = -hi;
  }
  if (options.flavor != PercentileFlavor::kPytorchQuantization) {
    // onnxruntime clips the range to the observed data range.
    if (!std::isnan(hist.observed_min) && lo < hist.observed_min)
      lo = static_cast<float>(hist.observed_min);
    if (!std::isnan(hist.observed_max) && hi > hist.observed_max)
      hi = static_cast<float>(hist.observed_max);
  }
  r.lo = lo;
  r.hi = hi;
  r.amax = std::max(std::fabs(lo), std::fabs(hi));
  return r;
}

Result<float> ExactPercentileAbs(FloatSpan values, double fraction) {
  QK_RETURN_IF_NOT(fraction >= 0.0 && fraction < 1.0, StatusCode::kInvalidArgument,
                   "percentile fraction {} is not in [0, 1)", fraction);
  QK_RETURN_IF_NOT(values.size > 0, StatusCode::kInvalidArgument, "no values");
  std::vector<float> a(values.size);
  for (size_t j = 0; j < values.size; ++j) a[j] = std::fabs(values.data[j]);
  // TVM: k = int(N * fraction); np.partition(|x|, k)[k].
  const size_t k = static_cast<size_t>(static_cast<double>(values.size) * fraction);
  std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), a.end());
  return a[k];
}

}  // namespace quantkit::quant
