#include "quant/collectors/range.h"

#include <algorithm>
#include <cmath>

#include "quant/collectors/scan.h"

namespace quantkit::quant {

bool RangeStats::operator==(const RangeStats& o) const {
  return count == o.count && nan_count == o.nan_count && posinf_count == o.posinf_count &&
         neginf_count == o.neginf_count && zero_count == o.zero_count && min == o.min &&
         max == o.max && amax == o.amax;
}

bool RangeStats::Consistent() const {
  if (count < 0 || nan_count < 0 || posinf_count < 0 || neginf_count < 0 || zero_count < 0 ||
      finite_count() < 0 || zero_count > finite_count()) {
    return false;
  }
  if (finite_count() == 0) {
    return min == std::numeric_limits<float>::infinity() &&
           max == -std::numeric_limits<float>::infinity() && amax == 0.0f;
  }
  return std::isfinite(min) && std::isfinite(max) && min <= max &&
         amax == std::max(std::fabs(min), std::fabs(max));
}

void RangeCollector::Observe(FloatSpan values) {
  // One vectorised (and, for large tensors, threaded) pass for the common case; NaN/Inf are
  // rare and recounted below.
  Observe(values, scan::Summarize(values));
}

void RangeCollector::Observe(FloatSpan values, const scan::Summary& batch) {
  RangeStats& s = stats_;
  s.count += static_cast<int64_t>(values.size);
  if (batch.nonfinite) {
    for (float v : values) {
      if (std::isnan(v))
        ++s.nan_count;
      else if (v == std::numeric_limits<float>::infinity())
        ++s.posinf_count;
      else if (v == -std::numeric_limits<float>::infinity())
        ++s.neginf_count;
    }
  }
  s.zero_count += batch.zeros;
  const float mn = std::min(s.min, batch.min), mx = std::max(s.max, batch.max);
  // -0.0 vs +0.0: min/max of equal zeros would depend on order; normalise to +0.0.
  s.min = mn == 0.0f ? 0.0f : mn;
  s.max = mx == 0.0f ? 0.0f : mx;
  if (s.min <= s.max) s.amax = std::max(std::fabs(s.min), std::fabs(s.max));
}

void RangeCollector::Merge(const RangeCollector& other) {
  RangeStats& s = stats_;
  const RangeStats& o = other.stats_;
  s.count += o.count;
  s.nan_count += o.nan_count;
  s.posinf_count += o.posinf_count;
  s.neginf_count += o.neginf_count;
  s.zero_count += o.zero_count;
  s.min = std::min(s.min, o.min);
  s.max = std::max(s.max, o.max);
  s.amax = std::max(s.amax, o.amax);
}

RangeCollector RangeCollector::FromStats(const RangeStats& stats) {
  RangeCollector c;
  c.stats_ = stats;
  return c;
}

}  // namespace quantkit::quant
