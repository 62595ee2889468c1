#include "quant/collectors/per_channel.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace quantkit::quant {

Status PerChannelAbsMaxCollector::Observe(const TensorView& t) {
  const int64_t rank = static_cast<int64_t>(t.dims.size());
  const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
  QK_RETURN_IF_NOT(axis >= 0 && axis < rank, StatusCode::kInvalidArgument,
                   "per-channel axis {} is out of range for a rank-{} tensor", axis_, rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    QK_RETURN_IF_NOT(t.dims[static_cast<size_t>(d)] >= 0, StatusCode::kInvalidArgument,
                     "negative dimension {}", t.dims[static_cast<size_t>(d)]);
    if (d < axis) outer *= t.dims[static_cast<size_t>(d)];
    if (d > axis) inner *= t.dims[static_cast<size_t>(d)];
  }
  const int64_t channels = t.dims[static_cast<size_t>(axis)];
  QK_RETURN_IF_NOT(outer * channels * inner == static_cast<int64_t>(t.values.size),
                   StatusCode::kInvalidArgument, "dims describe {} values but {} were given",
                   outer * channels * inner, t.values.size);
  if (!resolved_) {
    resolved_ = true;
    axis_ = axis;
    amax_.assign(static_cast<size_t>(channels), 0.0f);
  }
  QK_RETURN_IF_NOT(static_cast<int64_t>(amax_.size()) == channels, StatusCode::kInvalidArgument,
                   "per-channel axis {} has {} channels, earlier batches had {}", axis, channels,
                   amax_.size());
  const float* x = t.values.data;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      float m = amax_[static_cast<size_t>(c)];
      const float* row = x + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const float a = std::fabs(row[i]);
        if (a <= std::numeric_limits<float>::max()) {
          m = std::max(m, a);
        } else {
          ++nonfinite_;
        }
      }
      amax_[static_cast<size_t>(c)] = m;
    }
  }
  return Status::Ok();
}

Status PerChannelAbsMaxCollector::Merge(const PerChannelAbsMaxCollector& other) {
  if (!other.resolved_) return Status::Ok();
  if (!resolved_) {
    *this = other;
    return Status::Ok();
  }
  QK_RETURN_IF_NOT(axis_ == other.axis_ && amax_.size() == other.amax_.size(),
                   StatusCode::kInvalidArgument,
                   "cannot merge per-channel statistics (axis {} x {} channels vs axis {} x {})",
                   axis_, amax_.size(), other.axis_, other.amax_.size());
  for (size_t c = 0; c < amax_.size(); ++c) amax_[c] = std::max(amax_[c], other.amax_[c]);
  nonfinite_ += other.nonfinite_;
  return Status::Ok();
}

PerChannelStats PerChannelAbsMaxCollector::Finalize() const {
  PerChannelStats s;
  s.axis = axis_;
  s.amax = amax_;
  s.nonfinite_count = nonfinite_;
  return s;
}

PerChannelAbsMaxCollector PerChannelAbsMaxCollector::FromStats(const PerChannelStats& stats) {
  PerChannelAbsMaxCollector c(stats.axis);
  c.resolved_ = !stats.amax.empty();
  c.amax_ = stats.amax;
  c.nonfinite_ = stats.nonfinite_count;
  return c;
}

}  // namespace quantkit::quant
