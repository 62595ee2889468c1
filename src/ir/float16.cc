#include "ir/float16.h"

#include <cstring>

namespace quantkit::ir {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  const uint32_t u = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (NaN keeps a quiet mantissa bit)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds above 65504
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal FP16 (or zero). Adding 0.5 in float32 aligns the mantissa so the
    // hardware's own round-to-nearest-even does the rounding at 2^-24.
    const float rounded = FromBits(abs) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(Bits(rounded) - Bits(0.5f)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  const uint32_t odd = (abs >> 13) & 1u;
  const uint32_t r = abs + 0xc8000fffu + odd;  // (15 - 127) << 23, plus the rounding bias
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(r >> 13));
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float32.
    const float v = static_cast<float>(mant) * kFloat16MinSubnormal;
    return FromBits(sign | Bits(v));
  }
  if (exp == 31) return FromBits(sign | 0x7f800000u | (mant << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t FloatToBFloat16(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t odd = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + odd) >> 16);
}

float BFloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

float RoundToFloatType(float f, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return HalfToFloat(FloatToHalf(f));
    case DType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(f));
    default: return f;
  }
}

Result<Tensor> ConvertFloatTensor(const Tensor& t, DType to) {
  if (t.dtype() != DType::kFloat || (to != DType::kFloat16 && to != DType::kBFloat16)) {
    return Status(StatusCode::kInvalidArgument, "ConvertFloatTensor: float32 to float16/bfloat16 only");
  }
  Tensor out(to, t.dims());
  const float* src = t.data_as<float>();
  uint16_t* dst = out.mutable_data_as<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = to == DType::kFloat16 ? FloatToHalf(src[i]) : FloatToBFloat16(src[i]);
  out.name = t.name;
  out.doc_string = t.doc_string;
  return out;
}

}  // namespace quantkit::ir
