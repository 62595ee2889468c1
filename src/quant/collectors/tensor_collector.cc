#include "quant/collectors/tensor_collector.h"

#include <limits>

#include "common/check.h"

namespace quantkit::quant {

TensorCollector::TensorCollector(int log2_bins, std::optional<int64_t> channel_axis)
    : histogram_(log2_bins) {
  if (channel_axis) per_channel_.emplace(*channel_axis);
}

TensorCollector TensorCollector::RangeOnly() {
  TensorCollector c(kMinStreamLog2Bins);  // smallest histogram: never filled
  c.has_histogram_ = false;
  return c;
}

TensorCollector TensorCollector::RangeOnly(const RangeStats& range,
                                           std::optional<PerChannelStats> per_channel) {
  TensorCollector c = RangeOnly();
  c.range_ = RangeCollector::FromStats(range);
  c.range_stats_ = range;
  if (per_channel) c.per_channel_ = PerChannelAbsMaxCollector::FromStats(*per_channel);
  return c;
}

Status TensorCollector::Observe(const TensorView& tensor) {
  if (per_channel_) QK_RETURN_IF_ERROR(per_channel_->Observe(tensor));
  // One scan feeds both: the histogram's pass also summarises (min/max/zeros/non-finite).
  if (has_histogram_) {
    range_.Observe(tensor.values, histogram_.ObserveAndSummarize(tensor.values));
  } else {
    range_.Observe(tensor.values);
  }
  range_stats_ = range_.Finalize();
  return Status::Ok();
}

Status TensorCollector::Merge(const TensorCollector& other) {
  QK_RETURN_IF_NOT(has_histogram_ == other.has_histogram_, StatusCode::kInvalidArgument,
                   "cannot merge range-only statistics with statistics that have a histogram");
  QK_RETURN_IF_NOT(histogram_.log2_bins() == other.histogram_.log2_bins(),
                   StatusCode::kInvalidArgument,
                   "cannot merge histograms with 2^{} and 2^{} fine bins", histogram_.log2_bins(),
                   other.histogram_.log2_bins());
  QK_RETURN_IF_NOT(per_channel_.has_value() == other.per_channel_.has_value(),
                   StatusCode::kInvalidArgument,
                   "cannot merge per-channel statistics with per-tensor-only statistics");
  // Every other count is at most `count` (the reader checks it): only this sum can overflow.
  int64_t merged = 0;
  QK_RETURN_IF_NOT(
      !__builtin_add_overflow(range_stats_.count, other.range_stats_.count, &merged),
      StatusCode::kInvalidArgument, "merged statistics would count more than {} values ({} + {})",
      std::numeric_limits<int64_t>::max(), range_stats_.count, other.range_stats_.count);
  if (per_channel_) QK_RETURN_IF_ERROR(per_channel_->Merge(*other.per_channel_));
  range_.Merge(other.range_);
  range_stats_ = range_.Finalize();
  histogram_.Merge(other.histogram_);
  return Status::Ok();
}

std::optional<PerChannelStats> TensorCollector::per_channel() const {
  if (!per_channel_) return std::nullopt;
  return per_channel_->Finalize();
}

Result<TensorCollector> TensorCollector::FromParts(const RangeStats& range,
                                                   StreamingHistogram histogram,
                                                   std::optional<PerChannelStats> per_channel) {
  TensorCollector c(histogram.log2_bins());
  c.range_ = RangeCollector::FromStats(range);
  c.range_stats_ = range;
  c.histogram_ = std::move(histogram);
  if (per_channel) c.per_channel_ = PerChannelAbsMaxCollector::FromStats(*per_channel);
  return c;
}

bool TensorCollector::operator==(const TensorCollector& o) const {
  return has_histogram_ == o.has_histogram_ && range_stats_ == o.range_stats_ &&
         histogram_ == o.histogram_ && per_channel() == o.per_channel();
}

}  // namespace quantkit::quant
