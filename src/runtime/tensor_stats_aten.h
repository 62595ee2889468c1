// The ATen entry point of runtime/tensor_stats.h, for the interpreter: summarises an at::Tensor
// on whatever device it lives; only the summary is copied to the host.
#pragma once

#include <ATen/ATen.h>

#include "runtime/tensor_stats.h"

namespace quantkit::runtime {

// `x` must be real (float or any integer/bool dtype; converted to float32 first). kInvalidArgument
// when the channel axis is out of range.
Result<TensorStats> ComputeTensorStats(const at::Tensor& x, const TensorStatsRequest& request);

}  // namespace quantkit::runtime
