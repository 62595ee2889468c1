// Can a tensor be stored in float16 (or bfloat16)? The answer calibration statistics give,
// without another run: the writer of mixed FP16 + INT8 models keeps a tensor in FP32 where this
// says no (docs/strongly-typed.md), and the measured per-layer check (analysis/float16_check.h)
// reports it beside the errors it measures.
//
// Two ways a float16 tensor loses what FP32 holds:
//   overflow   |x| > 65504 becomes +-inf. Calibration data is a sample: a tensor whose amax
//              reaches kFloat16Max / range_margin is refused (default margin 16, i.e. amax >
//              4094: the writer's margin, passes/float_precision.h kFloat16RangeMargin; ModelOpt's
//              AutoCast keeps nodes whose data exceed 512 in FP32, a margin of 128), as are
//              tensors that already held NaN or +-Inf in FP32 (FP16 cannot do better);
//   underflow  |x| < 2^-14 is subnormal in float16 (fewer than 11 significant bits) and
//              |x| <= 2^-25 becomes 0. The streaming histogram's fine bins have power-of-two
//              edges, so the share of non-zero values below 2^-14 is bounded exactly from below
//              and above (equal when a bin is no wider than 2^-14, i.e. amax < 1); a tensor whose
//              lower bound exceeds max_subnormal_share is refused.
// bfloat16 has float32's exponent range: only non-finite values and overflow past its max refuse.
//
// Weights are checked exactly from their values (CheckFloatRange on an ir::Tensor).
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "ir/tensor.h"
#include "quant/collectors/tensor_collector.h"
#include "quantkit/status.h"

namespace quantkit::quant {

inline constexpr double kDefaultFloat16RangeMargin = 16.0;
inline constexpr double kDefaultMaxSubnormalShare = 0.01;

struct FloatRangeOptions {
  ir::DType dtype = ir::DType::kFloat16;  // float16 or bfloat16
  double range_margin = kDefaultFloat16RangeMargin;        // >= 1
  double max_subnormal_share = kDefaultMaxSubnormalShare;  // [0, 1]
};
// kInvalidArgument naming the bad field.
Status CheckFloatRangeOptions(const FloatRangeOptions& options);

enum class FloatRangeVerdict { kFits, kOverflow, kNonFinite, kUnderflow, kNoData };

struct FloatRangeCheck {
  FloatRangeVerdict verdict = FloatRangeVerdict::kNoData;
  double amax = 0;      // finite abs-max seen
  double headroom = 0;  // dtype max / amax (inf when amax is 0)
  int64_t nonzero = 0;  // finite non-zero values
  // Share of finite non-zero values below float16's smallest normal (2^-14): bounds, equal when
  // exact. 0 for bfloat16 (float32's normal range).
  double subnormal_share_min = 0, subnormal_share_max = 0;
  int64_t nonfinite = 0;  // NaN and +-Inf seen in FP32
  std::string reason;     // one line: why it must stay FP32, or why it fits

  bool fits() const { return verdict == FloatRangeVerdict::kFits; }
};

const char* FloatRangeVerdictName(FloatRangeVerdict v);

// The counts every check decides from; they add over blocks of values (batches, ranks).
struct FloatRangeCounts {
  int64_t count = 0;      // values seen, non-finite included
  double amax = 0;        // finite abs-max
  int64_t nonfinite = 0;  // NaN, +-Inf
  int64_t nonzero = 0;    // finite non-zero
  // Finite non-zero values below 2^-14: bounds (equal when exact); known = false when no
  // histogram could tell.
  int64_t subnormal_min = 0, subnormal_max = 0;
  bool subnormal_known = true;

  // Exact counts of `n` float32 values, added to these.
  void Add(const float* x, int64_t n);
  void Merge(const FloatRangeCounts& other);
};

FloatRangeCheck CheckFloatRange(const FloatRangeCounts& counts, const FloatRangeOptions& options);
// From calibration statistics (a range-only collector has no histogram: underflow not judged).
FloatRangeCheck CheckFloatRange(const TensorCollector& stats, const FloatRangeOptions& options);
// From a constant's values (float, float16, bfloat16, double); kNoData for other dtypes.
FloatRangeCheck CheckFloatRange(const ir::Tensor& values, const FloatRangeOptions& options);

}  // namespace quantkit::quant
