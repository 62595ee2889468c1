#include "ir/float16.h"

#include <fp16.h>

#include <cstring>

#include "common/check.h"

namespace quantkit::ir {

uint16_t FloatToHalf(float value) { return fp16_ieee_from_fp32_value(value); }
float HalfToFloat(uint16_t bits) { return fp16_ieee_to_fp32_value(bits); }

// bfloat16 is the upper half of a float32; libfp16 has no bfloat16, and this is the whole format:
// add 0x7FFF plus the lowest kept bit (round half to even), keep the top 16 bits. A NaN is made
// quiet first so that rounding cannot carry its payload into the exponent (c10::BFloat16 alike).
uint16_t FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float BFloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

float RoundToFloatType(float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return HalfToFloat(FloatToHalf(value));
    case DType::kBFloat16:
      return BFloat16ToFloat(FloatToBFloat16(value));
    default:
      return value;
  }
}

bool ReadFloatValues(const Tensor& t, std::vector<float>* out) {
  const int64_t n = t.numel();
  if (t.nbytes() < StorageBytes(t.dtype(), n)) return false;
  switch (t.dtype()) {
    case DType::kFloat:
      out->assign(t.data_as<float>(), t.data_as<float>() + n);
      return true;
    case DType::kDouble:
      out->assign(t.data_as<double>(), t.data_as<double>() + n);
      return true;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t* p = t.data_as<uint16_t>();
      out->resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        (*out)[static_cast<size_t>(i)] =
            t.dtype() == DType::kFloat16 ? HalfToFloat(p[i]) : BFloat16ToFloat(p[i]);
      }
      return true;
    }
    default:
      return false;
  }
}

Result<Tensor> ConvertFloatTensor(const Tensor& t, DType to) {
  QK_RETURN_IF_NOT(to == DType::kFloat || Is16BitFloat(to), StatusCode::kInvalidArgument,
                   "tensor '{}': cannot convert to {} (float, float16 or bfloat16 only)", t.name,
                   DTypeName(to));
  std::vector<float> values;
  QK_RETURN_IF_NOT(ReadFloatValues(t, &values), StatusCode::kInvalidArgument,
                   "tensor '{}': {} is not a float type to convert to {}", t.name,
                   DTypeName(t.dtype()), DTypeName(to));
  Tensor out(to, t.dims());
  if (to == DType::kFloat) {
    std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
  } else {
    uint16_t* dst = out.mutable_data_as<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      dst[i] = to == DType::kFloat16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
    }
  }
  out.name = t.name;
  out.doc_string = t.doc_string;
  out.metadata_props = t.metadata_props;
  return out;
}

}  // namespace quantkit::ir
