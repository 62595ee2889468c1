#include "quant/params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/check.h"

namespace quantkit::quant {
namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();
constexpr float kFltMin = std::numeric_limits<float>::min();  // smallest normal, 2^-126
constexpr float kInt8SymmetricBound = 127.0f;

uint32_t Bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

}  // namespace

const char* ScaleDiagnosticName(ScaleDiagnostic d) {
  switch (d) {
    case ScaleDiagnostic::kOk:
      return "ok";
    case ScaleDiagnostic::kZeroRange:
      return "zero range: scale set to 1";
    case ScaleDiagnostic::kNaNRange:
      return "NaN range: scale set to 1, zero point 0";
    case ScaleDiagnostic::kInfiniteRange:
      return "infinite range clamped to the largest float";
    case ScaleDiagnostic::kTinyScale:
      return "scale below FLT_MIN: scale set to 1, zero point 0";
    case ScaleDiagnostic::kNegativeAmax:
      return "negative amax: its magnitude was used";
  }
  return "unknown";
}

Result<QuantRange> RangeFor(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kInt8:
      return QuantRange{-128, 127};
    case ir::DType::kUint8:
      return QuantRange{0, 255};
    case ir::DType::kInt16:
      return QuantRange{-32768, 32767};
    case ir::DType::kUint16:
      return QuantRange{0, 65535};
    case ir::DType::kInt4:
      return QuantRange{-8, 7};
    case ir::DType::kUint4:
      return QuantRange{0, 15};
    default:
      return MakeStatus(StatusCode::kInvalidArgument, "no integer quantization range for dtype {}",
                        ir::DTypeName(dtype));
  }
}

Result<QuantRange> NarrowRangeFor(ir::DType dtype) {
  QK_ASSIGN_OR_RETURN(QuantRange r, RangeFor(dtype));
  if (r.min < 0) r.min = -r.max;  // signed types drop the most negative value
  return r;
}

QuantParams SymmetricInt8Params(float amax) {
  QuantParams p;
  p.dtype = ir::DType::kInt8;
  if (std::isnan(amax)) {
    p.diagnostic = ScaleDiagnostic::kNaNRange;
    return p;
  }
  if (amax < 0) {
    amax = -amax;
    p.diagnostic = ScaleDiagnostic::kNegativeAmax;
  }
  if (amax > kFltMax) {
    amax = kFltMax;
    p.diagnostic = ScaleDiagnostic::kInfiniteRange;
  }
  const float scale = amax / kInt8SymmetricBound;
  if (scale < kFltMin) {
    p.diagnostic = amax == 0 ? ScaleDiagnostic::kZeroRange : ScaleDiagnostic::kTinyScale;
    return p;
  }
  p.scale = scale;
  return p;
}

Result<QuantParams> ComputeScaleZeroPoint(float rmin, float rmax, ir::DType dtype, bool symmetric) {
  QK_ASSIGN_OR_RETURN(const QuantRange full, RangeFor(dtype));
  QK_ASSIGN_OR_RETURN(const QuantRange narrow, NarrowRangeFor(dtype));
  const QuantRange qr = symmetric ? narrow : full;
  QuantParams p;
  p.dtype = dtype;
  if (std::isnan(rmin) || std::isnan(rmax)) {
    p.diagnostic = ScaleDiagnostic::kNaNRange;
    return p;
  }
  QK_RETURN_IF_NOT(rmin <= rmax, StatusCode::kInvalidArgument, "range [{}, {}] has min > max", rmin,
                   rmax);
  if (std::isinf(rmin) || std::isinf(rmax)) {
    rmin = std::max(rmin, -kFltMax);
    rmax = std::min(rmax, kFltMax);
    p.diagnostic = ScaleDiagnostic::kInfiniteRange;
  }
  // Include 0 so that it is exactly representable.
  rmin = std::min(rmin, 0.0f);
  rmax = std::max(rmax, 0.0f);
  if (symmetric) {
    const float absmax = std::max(std::fabs(rmin), std::fabs(rmax));
    rmin = -absmax;
    rmax = absmax;
  }
  // onnxruntime: dr = float32(rmax - rmin) then float64 division; fall back to float64 when the
  // float32 difference overflows (only reachable with clamped infinite ranges).
  double dr = static_cast<double>(rmax - rmin);
  if (std::isinf(dr)) dr = static_cast<double>(rmax) - static_cast<double>(rmin);
  const double dq = static_cast<double>(qr.max) - static_cast<double>(qr.min);
  const double scale = dr / dq;
  const float scale_f = static_cast<float>(scale);
  if (scale < kFltMin || scale_f < kFltMin) {
    p.diagnostic = dr == 0 ? ScaleDiagnostic::kZeroRange : ScaleDiagnostic::kTinyScale;
    p.scale = 1.0f;
    p.zero_point = 0;
    return p;
  }
  double zp = symmetric
                  ? std::nearbyint((static_cast<double>(qr.max) + qr.min) / 2.0)
                  : std::nearbyint(static_cast<double>(qr.min) - static_cast<double>(rmin) / scale);
  zp = std::clamp(zp, static_cast<double>(full.min), static_cast<double>(full.max));
  p.scale = std::isinf(scale_f) ? kFltMax : scale_f;
  p.zero_point = static_cast<int32_t>(zp);
  return p;
}

int32_t QuantizeValue(float x, float scale, int32_t zero_point, QuantRange range) {
  if (std::isnan(x)) return std::clamp(zero_point, range.min, range.max);
  const float scaled = x / scale;
  // nearbyint uses the default round-to-nearest-even mode; clamp before converting (no UB).
  const double q = static_cast<double>(std::nearbyint(scaled)) + zero_point;
  return static_cast<int32_t>(
      std::clamp(q, static_cast<double>(range.min), static_cast<double>(range.max)));
}

float Dequantize(int32_t q, float scale, int32_t zero_point) {
  return static_cast<float>(q - zero_point) * scale;
}

std::string EncodeScaleBitsHex(float scale) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", Bits(scale));
  return buf;
}

std::string EncodeTrtScaleHex(float amax) { return EncodeScaleBitsHex(amax / kInt8SymmetricBound); }

Result<float> DecodeTrtScaleHex(const std::string& hex) {
  QK_RETURN_IF_NOT(!hex.empty() && hex.size() <= 8, StatusCode::kInvalidArgument,
                   "calibration cache value '{}' is not 1 to 8 hex digits", hex);
  uint32_t u = 0;
  for (char ch : hex) {
    int d = -1;
    if (ch >= '0' && ch <= '9')
      d = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
      d = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F')
      d = ch - 'A' + 10;
    QK_RETURN_IF_NOT(d >= 0, StatusCode::kInvalidArgument,
                     "calibration cache value '{}' is not hexadecimal", hex);
    u = (u << 4) | static_cast<uint32_t>(d);
  }
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace quantkit::quant
