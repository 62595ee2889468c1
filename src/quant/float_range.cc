#include "quant/float_range.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "ir/float16.h"

namespace quantkit::quant {

Status CheckFloatRangeOptions(const FloatRangeOptions& o) {
  QK_RETURN_IF_NOT(ir::Is16BitFloat(o.dtype), StatusCode::kInvalidArgument,
                   "float range check: dtype {} is not float16 or bfloat16", ir::DTypeName(o.dtype));
  QK_RETURN_IF_NOT(o.range_margin >= 1 && std::isfinite(o.range_margin), StatusCode::kInvalidArgument,
                   "float range check: range margin {} must be >= 1", o.range_margin);
  QK_RETURN_IF_NOT(o.max_subnormal_share >= 0 && o.max_subnormal_share <= 1, StatusCode::kInvalidArgument,
                   "float range check: subnormal share {} must be in [0, 1]", o.max_subnormal_share);
  return Status::Ok();
}

const char* FloatRangeVerdictName(FloatRangeVerdict v) {
  switch (v) {
    case FloatRangeVerdict::kFits: return "fits";
    case FloatRangeVerdict::kOverflow: return "overflow";
    case FloatRangeVerdict::kNonFinite: return "non-finite";
    case FloatRangeVerdict::kUnderflow: return "underflow";
    case FloatRangeVerdict::kNoData: return "no data";
  }
  return "?";
}

void FloatRangeCounts::Add(const float* x, int64_t n) {
  count += n;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      ++nonfinite;
      continue;
    }
    const double a = std::fabs(x[i]);
    if (a == 0) continue;
    ++nonzero;
    amax = std::max(amax, a);
    if (a < ir::kFloat16MinNormal) {
      ++subnormal_min;
      ++subnormal_max;
    }
  }
}

void FloatRangeCounts::Merge(const FloatRangeCounts& o) {
  count += o.count;
  amax = std::max(amax, o.amax);
  nonfinite += o.nonfinite;
  nonzero += o.nonzero;
  subnormal_min += o.subnormal_min;
  subnormal_max += o.subnormal_max;
  subnormal_known = subnormal_known && o.subnormal_known;
}

FloatRangeCheck CheckFloatRange(const FloatRangeCounts& n, const FloatRangeOptions& o) {
  FloatRangeCheck c;
  if (n.count == 0) {
    c.reason = "no values observed";
    return c;
  }
  const std::string_view type = ir::DTypeName(o.dtype);
  const double max = o.dtype == ir::DType::kBFloat16 ? double{ir::kBFloat16Max} : double{ir::kFloat16Max};
  c.amax = n.amax;
  c.nonfinite = n.nonfinite;
  c.nonzero = n.nonzero;
  // bfloat16 has float32's normal range.
  const bool underflow_known = o.dtype == ir::DType::kFloat16 && n.subnormal_known && n.nonzero > 0;
  if (underflow_known) {
    c.subnormal_share_min = static_cast<double>(n.subnormal_min) / n.nonzero;
    c.subnormal_share_max = static_cast<double>(n.subnormal_max) / n.nonzero;
  }
  c.headroom = c.amax > 0 ? max / c.amax : std::numeric_limits<double>::infinity();
  if (c.nonfinite > 0) {
    c.verdict = FloatRangeVerdict::kNonFinite;
    c.reason = fmt::format("{} NaN/Inf values already in FP32", c.nonfinite);
  } else if (c.amax * o.range_margin > max) {
    c.verdict = FloatRangeVerdict::kOverflow;
    c.reason = fmt::format("amax {:.6g} is beyond {}'s range {:.6g} with margin {:g} (headroom {:.3g}x)", c.amax, type,
                           max, o.range_margin, c.headroom);
  } else if (underflow_known && c.subnormal_share_min > o.max_subnormal_share) {
    c.verdict = FloatRangeVerdict::kUnderflow;
    c.reason = fmt::format("{:.3g}% of the non-zero values are below {}'s smallest normal 2^-14 (limit {:.3g}%)",
                           100 * c.subnormal_share_min, type, 100 * o.max_subnormal_share);
  } else {
    c.verdict = FloatRangeVerdict::kFits;
    c.reason = fmt::format("fits {}: headroom {:.3g}x", type, c.headroom);
    if (c.subnormal_share_max > 0) {
      c.reason += fmt::format(", {:.3g}-{:.3g}% of non-zero values subnormal", 100 * c.subnormal_share_min,
                              100 * c.subnormal_share_max);
    }
  }
  return c;
}

FloatRangeCheck CheckFloatRange(const TensorCollector& stats, const FloatRangeOptions& options) {
  const RangeStats& r = stats.range();
  FloatRangeCounts n;
  n.count = r.count;
  n.amax = r.amax;
  n.nonfinite = r.nan_count + r.posinf_count + r.neginf_count;
  n.nonzero = r.finite_count() - r.zero_count;
  n.subnormal_known = false;
  if (stats.has_histogram() && !stats.histogram().empty_range()) {
    // Fine bins [k w, (k + 1) w), w a power of two: those ending at or below 2^-14 are wholly
    // subnormal, those starting below it partly (the bounds are equal when w <= 2^-14).
    const StreamingHistogram& h = stats.histogram();
    const double w = h.bin_width(), limit = ir::kFloat16MinNormal;
    for (int64_t k = 0; k < h.bins_per_sign() && k * w < limit; ++k) {
      const int64_t in_bin = h.positive()[static_cast<size_t>(k)] + h.negative()[static_cast<size_t>(k)];
      if ((k + 1) * w <= limit) n.subnormal_min += in_bin;
      n.subnormal_max += in_bin;
    }
    n.subnormal_known = true;
  }
  return CheckFloatRange(n, options);
}

FloatRangeCheck CheckFloatRange(const ir::Tensor& values, const FloatRangeOptions& options) {
  std::vector<float> v;
  if (!ir::ReadFloatValues(values, &v)) {
    FloatRangeCheck c;
    c.reason = fmt::format("{} values are not floats", ir::DTypeName(values.dtype()));
    return c;
  }
  FloatRangeCounts n;
  n.Add(v.data(), static_cast<int64_t>(v.size()));
  if (v.empty()) {
    FloatRangeCheck c;
    c.reason = "empty tensor";
    return c;
  }
  return CheckFloatRange(n, options);
}

}  // namespace quantkit::quant
