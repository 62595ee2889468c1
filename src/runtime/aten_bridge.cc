#include "runtime/aten_bridge.h"

#include <cstring>

#include "common/check.h"

namespace quantkit::runtime {

bool ToScalarType(ir::DType dtype, at::ScalarType* out) {
  using ir::DType;
  switch (dtype) {
    case DType::kFloat:
      *out = at::kFloat;
      return true;
    case DType::kUint8:
      *out = at::kByte;
      return true;
    case DType::kInt8:
      *out = at::kChar;
      return true;
    case DType::kInt16:
      *out = at::kShort;
      return true;
    case DType::kInt32:
      *out = at::kInt;
      return true;
    case DType::kInt64:
      *out = at::kLong;
      return true;
    case DType::kBool:
      *out = at::kBool;
      return true;
    case DType::kFloat16:
      *out = at::kHalf;
      return true;
    case DType::kDouble:
      *out = at::kDouble;
      return true;
    case DType::kBFloat16:
      *out = at::kBFloat16;
      return true;
    case DType::kComplex64:
      *out = at::kComplexFloat;
      return true;
    case DType::kComplex128:
      *out = at::kComplexDouble;
      return true;
    default:
      return false;
  }
}

ir::DType FromScalarType(at::ScalarType type) {
  using ir::DType;
  switch (type) {
    case at::kFloat:
      return DType::kFloat;
    case at::kByte:
      return DType::kUint8;
    case at::kChar:
      return DType::kInt8;
    case at::kShort:
      return DType::kInt16;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kBool:
      return DType::kBool;
    case at::kHalf:
      return DType::kFloat16;
    case at::kDouble:
      return DType::kDouble;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kComplexFloat:
      return DType::kComplex64;
    case at::kComplexDouble:
      return DType::kComplex128;
    default:
      return DType::kUndefined;
  }
}

Result<at::Tensor> WrapTensor(const ir::Tensor& t, const std::string& what) {
  at::ScalarType st;
  if (!ToScalarType(t.dtype(), &st)) {
    return MakeStatus(StatusCode::kUnsupported, "{}: dtype {} is not supported by the runtime",
                      what, ir::DTypeName(t.dtype()));
  }
  const auto opts = at::TensorOptions().dtype(st);
  if (t.numel() == 0 || t.data() == nullptr) return at::empty(t.dims(), opts);
  if (t.nbytes() < static_cast<size_t>(t.numel()) * at::elementSize(st)) {
    return MakeStatus(StatusCode::kInvalidModel, "{}: {} bytes for {} elements of {}", what,
                      t.nbytes(), t.numel(), ir::DTypeName(t.dtype()));
  }
  // Nothing writes through these, so dropping const is safe: kernels are functional, and the one
  // that may overwrite an input it was handed (FakeQuantizeLinear, kernel.h) requires a resizable
  // storage, which from_blob's is not.
  return at::from_blob(const_cast<void*>(t.data()), t.dims(), opts);
}

Result<at::Tensor> CopyToAten(const ir::Tensor& t, const std::string& what) {
  QK_ASSIGN_OR_RETURN(at::Tensor view, WrapTensor(t, what));
  return view.clone();
}

Result<ir::Tensor> ToIrTensor(const at::Tensor& t, const std::string& what) {
  const ir::DType dtype = FromScalarType(t.scalar_type());
  if (dtype == ir::DType::kUndefined) {
    return MakeStatus(StatusCode::kUnsupported, "{}: result dtype {} has no ONNX equivalent", what,
                      c10::toString(t.scalar_type()));
  }
  at::Tensor src = t.to(at::kCPU).contiguous();
  ir::Tensor out(dtype, src.sizes().vec());
  if (src.numel() > 0) std::memcpy(out.mutable_data(), src.data_ptr(), src.nbytes());
  return out;
}

}  // namespace quantkit::runtime
