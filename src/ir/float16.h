// The 16-bit float formats outside runtime/ (no ATen): IEEE 754 binary16 ("float16", FP16) and
// bfloat16, to and from float32, for scales, weights and statistics read or written by the
// formats, passes and checks. The runtime converts with ATen's own routines, which round alike.
//
//   float16:  1 sign, 5 exponent, 10 mantissa bits (11 significant), max 65504, smallest normal
//             2^-14, smallest subnormal 2^-24. FloatToHalf rounds to nearest even (libfp16's
//             fp16_ieee_from_fp32_value, the conversion PyTorch's c10::Half uses); a magnitude
//             past 65504 + half an ulp becomes +-inf; NaN stays NaN.
//   bfloat16: the top 16 bits of a float32 (8 exponent, 8 significant bits); FloatToBFloat16
//             rounds to nearest even on the dropped 16 bits; NaN stays a quiet NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::ir {

inline constexpr float kFloat16Max = 65504.0f;
inline constexpr float kFloat16MinNormal = 6.103515625e-05f;            // 2^-14
inline constexpr float kFloat16MinSubnormal = 5.9604644775390625e-08f;  // 2^-24
inline constexpr float kBFloat16Max = 3.38953138925153547590470800371487866880e+38f;
inline constexpr float kBFloat16MinNormal = 1.17549435082228750796873653722224568e-38f;  // 2^-126

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// float16 or bfloat16: the types a strongly typed TensorRT network stores activations in.
inline bool Is16BitFloat(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

// `value` rounded to the precision of `dtype` (float16, bfloat16) and back; other types unchanged.
float RoundToFloatType(float value, DType dtype);

// The values of a float, float16, bfloat16 or double tensor as float32 (16-bit values exactly;
// doubles rounded). False, leaving `out` alone, for any other dtype.
bool ReadFloatValues(const Tensor& t, std::vector<float>* out);

// A copy of a float / float16 / bfloat16 / double tensor converted to `to` (one of float,
// float16, bfloat16), rounding to nearest even; name, doc string and metadata are kept.
// kInvalidArgument for other dtypes.
Result<Tensor> ConvertFloatTensor(const Tensor& t, DType to);

}  // namespace quantkit::ir
