// IEEE binary16 (FP16) and bfloat16 <-> float32 conversions, the bit-level definitions every layer
// without ATen uses (passes writing FP16 models, formats reading FP16 scales, data readers).
//
//   FP16:  1 sign, 5 exponent (bias 15), 10 mantissa bits: normals 2^-14 .. 65504, subnormals down
//          to 2^-24; float32 -> FP16 rounds to nearest, ties to even; beyond 65504 (after rounding)
//          it is +-inf; NaN stays NaN (quiet).
//   BF16:  the top 16 bits of a float32 (8 exponent bits: float32's range, 7 mantissa bits);
//          float32 -> BF16 rounds to nearest, ties to even; NaN stays NaN.
// Rounding to nearest even is what onnx.numpy_helper / numpy's astype(float16) and a Cast in
// TensorRT and onnxruntime compute.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::ir {

inline constexpr float kFloat16Max = 65504.0f;                 // largest finite FP16
inline constexpr float kFloat16MinNormal = 6.103515625e-05f;   // 2^-14
inline constexpr float kFloat16MinSubnormal = 5.9604645e-08f;  // 2^-24
inline constexpr float kBFloat16Max = 3.38953138925153547590470800371487866880e+38f;
inline constexpr float kBFloat16MinNormal = 1.17549435082228750796873653722224568e-38f;  // 2^-126

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

// `f` as `dtype` holds it (kFloat16, kBFloat16; any other dtype returns f unchanged).
float RoundToFloatType(float f, DType dtype);

// A copy of a float32 tensor converted to `to` (float16 or bfloat16), rounding to nearest even;
// name and doc string kept. kInvalidArgument for other dtypes.
Result<Tensor> ConvertFloatTensor(const Tensor& t, DType to);

}  // namespace quantkit::ir
