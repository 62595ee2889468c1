// The ATen entry point of runtime/tensor_stats.h, for the interpreter: summarises an at::Tensor
// on whatever device it lives; only the summary is copied to the host.
#pragma once

#include <ATen/ATen.h>

#include "runtime/tensor_stats.h"

namespace quantkit::runtime {

// ComputeTensorStats in two halves, so that a run can copy the figures of all its watched
// tensors to the host at once (one synchronisation per run instead of one per tensor; the
// interpreter does): Launch queues the work on x's device and packs every figure into one
// float64 tensor there; Finish reads the host copy of `packed` into `stats`.
//
// Two algorithms give the same figures (the tests hold them to it, byte for byte):
//  - kFast (what runs use): a few passes over x and no synchronisation. It relies on x being
//    finite, which it learns only from the packed min/max (aminmax propagates NaN and infinity),
//    so it keeps x alive in `source` until Finish; when x was not finite, Finish says so and the
//    caller recomputes with kExact from `source` (rare: bad data). On a GPU the exact algorithm's
//    ~25 kernels per tensor (casts of every mask to int64, broadcast selects) and bincount's two
//    synchronisations were most of calibrate's time (docs/gpu.md, "Session 19").
//  - kExact: counts NaN, +-Inf and zeros apart and takes min/max over the finite values only.
enum class StatsAlgorithm { kFast, kExact };
struct PendingTensorStats {
  TensorStats stats;  // shape, count and the layout now; the figures after FinishTensorStats
  at::Tensor packed;  // float64 on x's device; undefined for an empty tensor (nothing to read)
  at::Tensor source;  // kFast: x, for the exact recomputation when it was not finite
  TensorStatsRequest request;
  StatsAlgorithm algorithm = StatsAlgorithm::kExact;
  int64_t bins = 0;      // 2^log2_bins
  int64_t channels = 0;  // per-channel maxima packed (0: none)
};
Result<PendingTensorStats> LaunchTensorStats(const at::Tensor& x, const TensorStatsRequest& request,
                                             StatsAlgorithm algorithm = StatsAlgorithm::kFast);
// `packed`: p->packed's values on the host (p->packed.numel() of them). False when the figures
// are not final (kFast met a non-finite value): CompleteTensorStats recomputes them.
[[nodiscard]] bool FinishTensorStats(const double* packed, PendingTensorStats* p);
// FinishTensorStats, then, when kFast met a non-finite value, the figures recomputed with kExact
// from p->source (synchronously: rare, bad data). What callers use.
Status CompleteTensorStats(const double* packed, PendingTensorStats* p);

// Both halves at once (kFast falls back to kExact by itself). `x` must be real (float or any
// integer/bool dtype; converted to float32 first). kInvalidArgument when the channel axis is out
// of range.
Result<TensorStats> ComputeTensorStats(const at::Tensor& x, const TensorStatsRequest& request,
                                       StatsAlgorithm algorithm = StatsAlgorithm::kFast);

// QUANTKIT_DEVICE_STATS=1: observers that take device statistics get them for host tensors too
// (computed by the same ATen code on the CPU), to check the device path against the host one.
bool DeviceStatsOnHost();

}  // namespace quantkit::runtime
