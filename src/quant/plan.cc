#include "quant/plan.h"

#include <cmath>

#include "common/check.h"

namespace quantkit::quant {

const char* QuantDTypeName(QuantDType dtype) {
  switch (dtype) {
    case QuantDType::kInt8:
      return "int8";
    case QuantDType::kUint8:
      return "uint8";
  }
  return "?";
}

const char* TensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::kActivation:
      return "activation";
    case TensorRole::kWeight:
      return "weight";
  }
  return "?";
}

Result<QuantDType> ParseQuantDType(const std::string& s) {
  if (s == "int8") return QuantDType::kInt8;
  if (s == "uint8") return QuantDType::kUint8;
  return MakeStatus(StatusCode::kInvalidArgument, "unknown quantized dtype '{}' (int8, uint8)", s);
}

const char* FloatDTypeName(FloatDType dtype) {
  switch (dtype) {
    case FloatDType::kFloat32:
      return "fp32";
    case FloatDType::kFloat16:
      return "fp16";
    case FloatDType::kBFloat16:
      return "bf16";
  }
  return "?";
}

Result<FloatDType> ParseFloatDType(const std::string& s) {
  if (s == "fp32" || s == "float32" || s == "float") return FloatDType::kFloat32;
  if (s == "fp16" || s == "float16") return FloatDType::kFloat16;
  if (s == "bf16" || s == "bfloat16") return FloatDType::kBFloat16;
  return MakeStatus(StatusCode::kInvalidArgument, "unknown float dtype '{}' (fp16, bf16, fp32)", s);
}

Result<TensorRole> ParseTensorRole(const std::string& s) {
  if (s == "activation") return TensorRole::kActivation;
  if (s == "weight") return TensorRole::kWeight;
  return MakeStatus(StatusCode::kInvalidArgument, "unknown tensor role '{}' (activation, weight)",
                    s);
}

float ScaleFromAmax(float amax) { return amax / 127.0f; }

float AmaxFromScale(float scale) { return static_cast<float>(static_cast<double>(scale) * 127.0); }

const TensorQuant* QuantPlan::Find(const std::string& tensor) const {
  auto it = tensors.find(tensor);
  return it == tensors.end() ? nullptr : &it->second;
}

TensorQuant& QuantPlan::SetActivationAmax(const std::string& tensor, float amax,
                                          const std::string& source) {
  TensorQuant& t = tensors[tensor];
  t = TensorQuant{};
  t.tensor = tensor;
  t.role = TensorRole::kActivation;
  t.source = source;
  const float scale = ScaleFromAmax(amax);
  // A zero, subnormal-underflowing, infinite or NaN range cannot make a usable scale: keep the
  // tensor in float and say why, instead of writing a scale TensorRT would reject.
  if (!std::isfinite(amax) || !(amax > 0.0f) || !(scale > 0.0f) || !std::isfinite(scale)) {
    t.quantized = false;
    t.reason = fmt::format("calibrated amax {} gives no usable scale; kept in float", amax);
    return t;
  }
  t.scale = {scale};
  t.amax = {amax};
  t.zero_point = {0};
  return t;
}

TensorQuant& QuantPlan::SetScale(const std::string& tensor, std::vector<float> scale, int64_t axis,
                                 TensorRole role, const std::string& source) {
  TensorQuant& t = tensors[tensor];
  t = TensorQuant{};
  t.tensor = tensor;
  t.role = role;
  t.source = source;
  t.axis = scale.size() > 1 ? axis : -1;
  t.amax.reserve(scale.size());
  for (float s : scale) t.amax.push_back(AmaxFromScale(s));
  t.zero_point.assign(scale.size(), 0);
  t.scale = std::move(scale);
  return t;
}

size_t QuantPlan::NumQuantized() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors) n += t.quantized ? 1 : 0;
  return n;
}

Status ValidatePlan(const QuantPlan& plan) {
  for (const auto& [name, t] : plan.tensors) {
    QK_RETURN_IF_NOT(name == t.tensor, StatusCode::kInternal, "plan key '{}' names tensor '{}'",
                     name, t.tensor);
    if (!t.quantized) continue;
    QK_RETURN_IF_NOT(!t.scale.empty(), StatusCode::kInvalidArgument,
                     "tensor '{}': quantized but has no scale", name);
    QK_RETURN_IF_NOT(t.amax.size() == t.scale.size() && t.zero_point.size() == t.scale.size(),
                     StatusCode::kInvalidArgument,
                     "tensor '{}': {} scales but {} amax and {} zero points", name, t.scale.size(),
                     t.amax.size(), t.zero_point.size());
    QK_RETURN_IF_NOT(t.scale.size() == 1 || t.axis >= 0, StatusCode::kInvalidArgument,
                     "tensor '{}': {} per-channel scales but no axis", name, t.scale.size());
    for (size_t i = 0; i < t.scale.size(); ++i) {
      // Denormal scales are refused too: 1/scale overflows to Inf in the quantizer, and
      // TensorRT flushes them to zero.
      QK_RETURN_IF_NOT(std::isnormal(t.scale[i]) && t.scale[i] > 0.0f, StatusCode::kInvalidArgument,
                       "tensor '{}': scale[{}] = {} is not a positive normal float", name, i,
                       t.scale[i]);
      const int32_t zp = t.zero_point[i];
      const bool in_range =
          t.dtype == QuantDType::kInt8 ? (zp >= -128 && zp <= 127) : (zp >= 0 && zp <= 255);
      QK_RETURN_IF_NOT(in_range, StatusCode::kInvalidArgument,
                       "tensor '{}': zero_point[{}] = {} is out of range for {}", name, i, zp,
                       QuantDTypeName(t.dtype));
    }
  }
  return Status::Ok();
}

}  // namespace quantkit::quant
