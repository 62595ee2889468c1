// Quantization parameter math: the scalar functions that define quantkit's INT8 formats.
//
//   real = scale · (q - zero_point),   q = saturate(round_half_even(real / scale) + zero_point)
//
// Symmetric int8 (TensorRT): scale = float32(amax) / 127.0f, zero_point = 0.
// Asymmetric uint8 (onnxruntime compute_scale_zp): the range is widened to include 0,
// scale = float32(float64(rmax - rmin) / 255) with rmax - rmin computed in float32,
// zero_point = round_half_even(0 - rmin / scale) (float64), saturated to [0, 255].
//
// Degenerate inputs never produce a zero, subnormal, infinite or NaN scale; each gets a defined
// result and a ScaleDiagnostic (see docs/calibration-methods.md "Scale and zero point"):
//   amax == 0 (or a range of width 0)  -> scale 1.0, zp as usual          kZeroRange
//   amax NaN (or rmin/rmax NaN)        -> scale 1.0, zero point 0 kNaNRange amax +-Inf -> amax
//   clamped to FLT_MAX                               kInfiniteRange scale would be < FLT_MIN (tiny
//   or subnormal amax) -> scale 1.0, zero point 0 (as onnxruntime;
//                                       every such value quantizes to 0 anyway) kTinyScale
//   amax < 0                           -> |amax| is used kNegativeAmax
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "quantkit/status.h"

namespace quantkit::quant {

enum class ScaleDiagnostic {
  kOk,
  kZeroRange,      // amax == 0 / rmin == rmax == 0: nothing to quantize; scale := 1
  kNaNRange,       // NaN bound: scale := 1, zero point := 0
  kInfiniteRange,  // infinite bound clamped to ±FLT_MAX
  kTinyScale,      // scale below FLT_MIN (would flush to zero on GPUs): scale := 1, zp := 0
  kNegativeAmax,   // amax < 0 treated as |amax|
};
const char* ScaleDiagnosticName(ScaleDiagnostic d);

struct QuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  ir::DType dtype = ir::DType::kInt8;
  ScaleDiagnostic diagnostic = ScaleDiagnostic::kOk;
};

struct QuantRange {
  int32_t min;
  int32_t max;
};

// Full integer range of an integer dtype (int8 [-128, 127], uint8 [0, 255], int4 [-8, 7], ...).
// kInvalidArgument for non-integer or unsupported dtypes.
Result<QuantRange> RangeFor(ir::DType dtype);
// Narrow (symmetric) range: int8 [-127, 127] as TensorRT weights and ORT's symmetric mode.
Result<QuantRange> NarrowRangeFor(ir::DType dtype);

// Symmetric per-tensor scale for int8: scale = float32(amax) / 127.0f, zero point 0.
QuantParams SymmetricInt8Params(float amax);

// onnxruntime compute_scale_zp for an integer dtype. symmetric=true: absmax over the widened
// range, qmin/qmax = the narrow range (int8 -127..127), zero point = round((qmax+qmin)/2).
Result<QuantParams> ComputeScaleZeroPoint(float rmin, float rmax, ir::DType dtype, bool symmetric);

// q = saturate(round_half_even(x / scale) + zero_point) into [range.min, range.max] (float32
// division as ONNX QuantizeLinear). NaN maps to zero_point (documented choice; ONNX leaves it
// undefined).
int32_t QuantizeValue(float x, float scale, int32_t zero_point, QuantRange range);
// x = (q - zero_point) · scale in float32.
float Dequantize(int32_t q, float scale, int32_t zero_point);

// "%08x" of the bits of a float32 scale: a TensorRT calibration-cache value (zero-padded, as
// strict readers need an even digit count).
std::string EncodeScaleBitsHex(float scale);
// TensorRT calibration cache value of an amax: EncodeScaleBitsHex(float32(amax) / 127.0f).
std::string EncodeTrtScaleHex(float amax);
// Parses 1..8 hex digits (lowercase or uppercase, no 0x) into the float32 scale they encode.
Result<float> DecodeTrtScaleHex(const std::string& hex);

}  // namespace quantkit::quant
