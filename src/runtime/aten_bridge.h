// Conversions between ir::Tensor (host, owning, ATen-free) and at::Tensor, runtime-internal.
#pragma once

#include <ATen/ATen.h>

#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::runtime {

// ir dtype -> ATen scalar type; false for dtypes ATen 1.13 lacks (uint16/32/64, string, fp8, int4).
bool ToScalarType(ir::DType dtype, at::ScalarType* out);
ir::DType FromScalarType(at::ScalarType type);

// Wraps the tensor's bytes without copying. The at::Tensor must not be written to and must not
// outlive `t`'s buffer (the caller keeps `t` alive). Fails for unsupported dtypes.
Result<at::Tensor> WrapTensor(const ir::Tensor& t, const std::string& what);
// Copies into a new owning at::Tensor (for constants the kernels keep).
Result<at::Tensor> CopyToAten(const ir::Tensor& t, const std::string& what);
// Copies a (possibly strided) at::Tensor into a new ir::Tensor.
Result<ir::Tensor> ToIrTensor(const at::Tensor& t, const std::string& what);

}  // namespace quantkit::runtime
