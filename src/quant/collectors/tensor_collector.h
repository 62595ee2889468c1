// TensorCollector: everything quantkit keeps about one tensor during calibration — exact range
// statistics, the partition-invariant streaming histogram and, for weights, per-channel abs-max.
// Enough to recompute every calibration method later (.qkstats stores exactly this state).
#pragma once

#include <optional>

#include "quant/collectors/histogram.h"
#include "quant/collectors/per_channel.h"
#include "quant/collectors/range.h"
#include "quant/span.h"
#include "quantkit/status.h"

namespace quantkit::quant {

class TensorCollector {
 public:
  explicit TensorCollector(int log2_bins = kDefaultStreamLog2Bins,
                           std::optional<int64_t> channel_axis = std::nullopt);
  // The max-only fast path: range statistics only, no histogram (the histogram is most of the
  // statistics' cost). Enough for the max method; histogram methods and .qkstats files refuse it.
  static TensorCollector RangeOnly();
  bool has_histogram() const { return has_histogram_; }

  Status Observe(const TensorView& tensor);
  // Exact and order independent; fails if histogram resolution or per-channel layout differ.
  Status Merge(const TensorCollector& other);

  const RangeStats& range() const { return range_stats_; }
  const StreamingHistogram& histogram() const { return histogram_; }
  std::optional<PerChannelStats> per_channel() const;

  static Result<TensorCollector> FromParts(const RangeStats& range, StreamingHistogram histogram,
                                           std::optional<PerChannelStats> per_channel);
  // A RangeOnly() collector holding these statistics (device statistics of the max-only path).
  static TensorCollector RangeOnlyFromParts(const RangeStats& range,
                                            std::optional<PerChannelStats> per_channel);
  bool operator==(const TensorCollector& o) const;

 private:
  bool has_histogram_ = true;
  RangeCollector range_;
  RangeStats range_stats_;
  StreamingHistogram histogram_;
  std::optional<PerChannelAbsMaxCollector> per_channel_;
};

}  // namespace quantkit::quant
