// The ATen entry point of runtime/tensor_stats.h, for the interpreter: summarises an at::Tensor
// on whatever device it lives; only the summary is copied to the host.
#pragma once

#include <ATen/ATen.h>

#include "runtime/tensor_stats.h"

namespace quantkit::runtime {

// `x` must be real (float or any integer/bool dtype; converted to float32 first). kInvalidArgument
// when the channel axis is out of range.
Result<TensorStats> ComputeTensorStats(const at::Tensor& x, const TensorStatsRequest& request);

// ComputeTensorStats in two halves, so that a run can copy the figures of all its watched
// tensors to the host at once (one synchronisation per run instead of one per tensor; the
// interpreter does): Launch queues the work on x's device and packs every figure into one
// float64 tensor there; Finish reads the host copy of `packed` into `stats`.
struct PendingTensorStats {
  TensorStats stats;  // shape, count and the layout now; the figures after FinishTensorStats
  at::Tensor packed;  // float64 on x's device; undefined for an empty tensor (nothing to read)
  int64_t bins = 0;   // 2^log2_bins
  int min_range_exp = 0;
  int64_t channels = 0;  // per-channel maxima packed (0: none)
};
Result<PendingTensorStats> LaunchTensorStats(const at::Tensor& x,
                                             const TensorStatsRequest& request);
// `packed`: p->packed's values on the host (p->packed.numel() of them).
void FinishTensorStats(const double* packed, PendingTensorStats* p);

// QUANTKIT_DEVICE_STATS=1: observers that take device statistics get them for host tensors too
// (computed by the same ATen code on the CPU), to check the device path against the host one.
bool DeviceStatsOnHost();

}  // namespace quantkit::runtime
