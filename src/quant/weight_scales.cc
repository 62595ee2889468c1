#include "quant/weight_scales.h"

#include <cmath>
#include <limits>

#include "common/check.h"
#include "quant/collectors/per_channel.h"
#include "quant/plan.h"

namespace quantkit::quant {

Result<std::vector<float>> PerChannelAbsMax(const float* data, const std::vector<int64_t>& dims,
                                            int64_t axis, const std::string& tensor) {
  const auto rank = static_cast<int64_t>(dims.size());
  QK_RETURN_IF_NOT(axis >= -1 && axis < std::max<int64_t>(rank, 1), StatusCode::kInvalidArgument,
                   "weight '{}': axis {} out of range for rank {}", tensor, axis, rank);
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  // Per tensor (axis -1) is one channel of a [1, numel] view.
  const std::vector<int64_t> view_dims = axis < 0 ? std::vector<int64_t>{1, numel} : dims;
  PerChannelAbsMaxCollector collector(axis < 0 ? 0 : axis);
  const TensorView view{FloatSpan(data, static_cast<size_t>(numel)), view_dims};
  QK_RETURN_IF_ERROR(collector.Observe(view).WithContext(fmt::format("weight '{}'", tensor)));
  const PerChannelStats stats = collector.Finalize();
  QK_RETURN_IF_NOT(stats.nonfinite_count == 0, StatusCode::kInvalidModel,
                   "weight '{}' holds {} non-finite values (NaN/Inf)", tensor,
                   stats.nonfinite_count);
  return stats.amax;
}

std::vector<float> WeightScalesFromAmax(const std::vector<float>& amax) {
  std::vector<float> scales;
  scales.reserve(amax.size());
  for (float a : amax) {
    const float s = ScaleFromAmax(a);
    // A channel of denormal weights (PP-OCRv4 recognition has one with max |w| = 3e-40) gets a
    // denormal scale, which TensorRT flushes to zero and ValidatePlan refuses: it is a zero
    // channel.
    scales.push_back(s >= kMinNormalScale ? s : kZeroChannelScale);
  }
  return scales;
}

}  // namespace quantkit::quant
