// RangeCollector: exact per-tensor range statistics (min, max, abs-max) and counts of NaN, ±Inf
// and zeros. Every statistic is a min, max or integer sum, so merging is exact and the result is
// bit-identical whatever the batch size, order or sharding.
#pragma once

#include <cstdint>
#include <limits>

#include "quant/collectors/scan.h"
#include "quant/span.h"

namespace quantkit::quant {

struct RangeStats {
  int64_t count = 0;  // all elements observed, NaN/Inf included
  int64_t nan_count = 0;
  int64_t posinf_count = 0;
  int64_t neginf_count = 0;
  int64_t zero_count = 0;  // +0.0 and -0.0
  // Over the finite values only; +inf/-inf (min/max) and 0 (amax) while none was seen.
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  float amax = 0.0f;

  int64_t finite_count() const { return count - nan_count - posinf_count - neginf_count; }
  // Whether a RangeCollector could have left these: non-negative counts adding up, min <= max and
  // amax the larger magnitude over the finite values (+inf, -inf and 0 while none was seen). What a
  // statistics file holds otherwise (amax < 0, min > max) is damage, not a range.
  bool Consistent() const;
  bool operator==(const RangeStats& o) const;
};

class RangeCollector {
 public:
  void Observe(FloatSpan values);
  // The same with the values' summary already computed (by the histogram's pass).
  void Observe(FloatSpan values, const scan::Summary& summary);
  void Merge(const RangeCollector& other);
  RangeStats Finalize() const { return stats_; }
  // Restores a collector from finalized statistics (used by the .qkstats reader).
  static RangeCollector FromStats(const RangeStats& stats);

 private:
  RangeStats stats_;
};

}  // namespace quantkit::quant
