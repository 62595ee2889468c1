#include "quant/weight_scales.h"

#include <cmath>

#include "common/check.h"
#include "quant/plan.h"

namespace quantkit::quant {

Result<std::vector<float>> PerChannelAbsMax(const float* data, const std::vector<int64_t>& dims,
                                            int64_t axis, const std::string& tensor) {
  const auto rank = static_cast<int64_t>(dims.size());
  QK_RETURN_IF_NOT(axis >= -1 && axis < std::max<int64_t>(rank, 1), StatusCode::kInvalidArgument,
                   "weight '{}': axis {} out of range for rank {}", tensor, axis, rank);
  int64_t outer = 1, channels = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (axis < 0 || i < axis) {
      outer *= dims[static_cast<size_t>(i)];
    } else if (i == axis) {
      channels = dims[static_cast<size_t>(i)];
    } else {
      inner *= dims[static_cast<size_t>(i)];
    }
  }
  std::vector<float> amax(static_cast<size_t>(channels), 0.0f);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* p = data + (o * channels + c) * inner;
      float m = amax[static_cast<size_t>(c)];
      for (int64_t k = 0; k < inner; ++k) {
        const float a = std::fabs(p[k]);
        QK_RETURN_IF_NOT(std::isfinite(a), StatusCode::kInvalidModel,
                         "weight '{}' holds a non-finite value ({}) at flat index {}", tensor, p[k],
                         (o * channels + c) * inner + k);
        m = std::max(m, a);
      }
      amax[static_cast<size_t>(c)] = m;
    }
  }
  return amax;
}

std::vector<float> WeightScalesFromAmax(const std::vector<float>& amax) {
  std::vector<float> scales;
  scales.reserve(amax.size());
  for (float a : amax) {
    const float s = ScaleFromAmax(a);
    scales.push_back(s > 0.0f ? s : kZeroChannelScale);
  }
  return scales;
}

}  // namespace quantkit::quant
