// PerChannelAbsMaxCollector: max |x| per slice along one axis (weights: Conv K of KCRS = axis 0,
// ConvTranspose axis 1, MatMul (K,N) axis 1). Non-finite values are counted and skipped. The
// result is a max per channel, hence exact and order independent.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/span.h"
#include "quantkit/status.h"

namespace quantkit::quant {

struct PerChannelStats {
  int64_t axis = 0;         // normalised (>= 0)
  std::vector<float> amax;  // one per channel; 0 where a channel had no finite value
  int64_t nonfinite_count = 0;
  bool operator==(const PerChannelStats& o) const {
    return axis == o.axis && amax == o.amax && nonfinite_count == o.nonfinite_count;
  }
};

class PerChannelAbsMaxCollector {
 public:
  // `axis` may be negative (counted from the end), resolved at the first Observe.
  explicit PerChannelAbsMaxCollector(int64_t axis) : axis_(axis) {}

  // Fails (kInvalidArgument) if the axis is out of range, dims do not match the value count, or
  // the channel count differs from earlier batches.
  Status Observe(const TensorView& tensor);
  Status Merge(const PerChannelAbsMaxCollector& other);
  PerChannelStats Finalize() const;
  // Restores a collector from finalized statistics (used by the .qkstats reader).
  static PerChannelAbsMaxCollector FromStats(const PerChannelStats& stats);

 private:
  int64_t axis_;
  bool resolved_ = false;
  std::vector<float> amax_;
  int64_t nonfinite_ = 0;
};

}  // namespace quantkit::quant
