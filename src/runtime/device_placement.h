// Moving tensors to the compute device (runtime-internal, ATen).
#pragma once

#include <ATen/ATen.h>

#include "runtime/device.h"

namespace quantkit::runtime {

at::Device ToAtenDevice(const Device& device);

// `t` on `device`. Host -> CUDA copies go through pinned (page-locked) memory and are
// asynchronous on the current stream, so the host prepares the next batch while the GPU works;
// ATen's pinned allocator keeps the staging buffer alive until the copy has run.
at::Tensor ToDevice(const at::Tensor& t, const at::Device& device);

// Tensors that stay on the host on a device interpreter: small integer and bool tensors are
// shape arithmetic (Reshape targets, Slice bounds, Gather indices of a Shape, the conditions of
// If on static dims), read by the kernels on the host; copying them to the GPU would cost a
// device-to-host sync per use. Applied to initializers when the interpreter is created, and to
// every kernel input on a device (host values made by kernels: Constant, Shape, ...).
inline constexpr int64_t kHostShapeTensorMaxElements = 64;
bool KeepOnHost(const at::Tensor& t);

}  // namespace quantkit::runtime
