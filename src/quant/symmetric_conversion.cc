#include "quant/symmetric_conversion.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "quant/params.h"
#include "quant/plan.h"

namespace quantkit::quant {
namespace {
constexpr int kInt8Codes = 256;
constexpr float kInt8Max = 127.0f;
}  // namespace

Result<SymmetricConversion> ToSymmetricInt8(float scale, int32_t zero_point, ir::DType dtype) {
  QK_RETURN_IF_NOT(dtype == ir::DType::kInt8 || dtype == ir::DType::kUint8,
                   StatusCode::kInvalidArgument, "{} quantization cannot become int8",
                   ir::DTypeName(dtype));
  QK_RETURN_IF_NOT(std::isfinite(scale) && scale > 0.0f, StatusCode::kInvalidArgument,
                   "scale {} is not finite and positive", scale);
  QK_ASSIGN_OR_RETURN(QuantRange range, RangeFor(dtype));
  QK_RETURN_IF_NOT(zero_point >= range.min && zero_point <= range.max, StatusCode::kInvalidArgument,
                   "zero point {} outside the {} range", zero_point, ir::DTypeName(dtype));
  SymmetricConversion c;
  c.scale_from = scale;
  c.lo = static_cast<double>(scale) * (range.min - zero_point);
  c.hi = static_cast<double>(scale) * (range.max - zero_point);
  c.sign_bit_wasted = c.lo >= 0.0;
  c.changed = !(dtype == ir::DType::kInt8 && zero_point == 0);
  if (!c.changed) {
    c.scale_to = scale;
    c.amax = AmaxFromScale(scale);
    return c;  // same grid: nothing lost
  }
  // ExtractQdqPlan (passes/extract_qdq.cc) calls this too, so reports and plans agree.
  c.scale_to = static_cast<float>(std::max(std::fabs(c.lo), std::fabs(c.hi))) / kInt8Max;
  c.amax = AmaxFromScale(c.scale_to);
  c.scale_ratio = static_cast<double>(c.scale_to) / scale;
  c.bits_lost = std::log2(c.scale_ratio);
  // int8 codes q in [-128, 127] whose value q*s' lies in [lo, hi].
  const double s = c.scale_to;
  const double q_lo = std::max(-128.0, std::ceil(c.lo / s - 1e-9));
  const double q_hi = std::min(127.0, std::floor(c.hi / s + 1e-9));
  const double used = std::max(0.0, q_hi - q_lo + 1.0);
  c.wasted_share = 1.0 - used / kInt8Codes;
  // Values within half a step of the end codes still round to them: only beyond is clipped
  // (float32 rounding of amax puts 127 s' a few ulps below hi; that costs nothing).
  const double new_lo = -128.5 * s;
  const double new_hi = 127.5 * s;
  const double outside = std::max(0.0, new_lo - c.lo) + std::max(0.0, c.hi - new_hi);
  c.clipped_share = outside / (c.hi - c.lo);
  return c;
}

}  // namespace quantkit::quant
