#include "pipelines/diagnose/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace quantkit::pipelines {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

double CoefficientOfVariation(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  if (mean == 0.0) return 0.0;
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size())) / std::fabs(mean);
}

std::vector<double> RobustZAgainst(const std::vector<double>& values,
                                   const std::vector<double>& base) {
  std::vector<double> z(values.size(), 0.0);
  if (base.empty()) return z;
  const double med = Median(base);
  std::vector<double> dev;
  dev.reserve(base.size());
  for (double x : base) dev.push_back(std::fabs(x - med));
  double scale = Median(dev) / 0.6745;  // MAD as a normal-consistent sigma
  if (scale == 0.0) {
    double mean_abs = 0.0;
    for (double d : dev) mean_abs += d;
    scale = mean_abs / static_cast<double>(dev.size()) * 1.2533;
  }
  if (scale == 0.0) {
    // The base never varies: any different value is infinitely far.
    for (size_t i = 0; i < values.size(); ++i) {
      z[i] = values[i] == med
                 ? 0.0
                 : std::copysign(std::numeric_limits<double>::infinity(), values[i] - med);
    }
    return z;
  }
  for (size_t i = 0; i < values.size(); ++i) z[i] = (values[i] - med) / scale;
  return z;
}

std::vector<double> RobustZ(const std::vector<double>& v) { return RobustZAgainst(v, v); }

namespace {

// Signed histogram over (-t, t) (zeros included, extremes clamped into the end bins), sum 1.
std::vector<double> SignedDistribution(const quant::StreamingHistogram& h, float t, int64_t bins) {
  std::vector<double> p(static_cast<size_t>(bins), 0.0);
  if (!h.empty_range()) {
    const quant::Histogram r = h.RebinSigned(bins, t);
    for (size_t i = 0; i < p.size() && i < r.counts.size(); ++i)
      p[i] = static_cast<double>(r.counts[i]);
  }
  double sum = 0.0;
  for (double x : p) sum += x;
  if (sum > 0) {
    for (double& x : p) x /= sum;
  }
  return p;
}

}  // namespace

double JensenShannonBits(const quant::StreamingHistogram& a, float a_range,
                         const quant::StreamingHistogram& b, float b_range, int64_t bins) {
  if (a.binned_count() == 0 || b.binned_count() == 0) return 0.0;
  // Few values over many bins inflate the divergence (empty bins on one side only): use about
  // sqrt(values) bins, between 16 and `bins`.
  const double fewest = static_cast<double>(std::min(a.binned_count(), b.binned_count()));
  bins = std::clamp<int64_t>(static_cast<int64_t>(std::sqrt(fewest)), std::min<int64_t>(16, bins),
                             std::max<int64_t>(bins, 2));
  float t = std::max(a_range, b_range);
  if (!(t > 0.0f)) t = 1.0f;
  const std::vector<double> p = SignedDistribution(a, t, bins), q = SignedDistribution(b, t, bins);
  double js = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double m = 0.5 * (p[i] + q[i]);
    if (p[i] > 0) js += 0.5 * p[i] * std::log2(p[i] / m);
    if (q[i] > 0) js += 0.5 * q[i] * std::log2(q[i] / m);
  }
  return std::clamp(js, 0.0, 1.0);
}

}  // namespace quantkit::pipelines
