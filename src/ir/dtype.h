// Element types, numbered exactly as ONNX TensorProto.DataType so that conversion is a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace quantkit::ir {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
};

// True for every value of DType above (data_type numbers a reader may accept).
bool IsKnownDType(int32_t value);
// Storage bits per element: 4 for int4/uint4/float4, 0 for string and undefined.
int BitsPerElement(DType dtype);
// Bytes for `count` elements, packed two per byte for 4-bit types (rounded up).
size_t StorageBytes(DType dtype, int64_t count);
// ONNX spelling, e.g. "float", "int8", "float8e4m3fn".
std::string_view DTypeName(DType dtype);
bool IsFloating(DType dtype);  // float, double, float16, bfloat16, float8*, float4
bool IsInteger(DType dtype);

}  // namespace quantkit::ir
