#include "quant/method_amax.h"

#include <cmath>

#include "common/check.h"

namespace quantkit::quant {

Result<CalibResult> AmaxFromHistogram(const Histogram& hist, float exact_amax,
                                      const MethodRequest& method) {
  CalibResult result;
  switch (method.method) {
    case CalibMethod::kMax:
      result.amax = exact_amax;
      result.lo = -exact_amax;
      result.hi = exact_amax;
      return result;
    case CalibMethod::kEntropy:
      return EntropyAmax(hist, EntropyOptions{});
    case CalibMethod::kPercentile: {
      PercentileOptions options;
      options.percentile = method.percentile;
      return PercentileAmax(hist, options);
    }
    case CalibMethod::kMse:
      return MseAmax(hist, MseOptions{});
  }
  return Status(StatusCode::kInternal, "unknown calibration method");
}

Result<CalibResult> AmaxFromCollector(const TensorCollector& collector,
                                      const MethodRequest& method) {
  const RangeStats& range = collector.range();
  CalibResult result;
  if (method.method == CalibMethod::kMax || !(range.amax > 0.0f) || !std::isfinite(range.amax)) {
    // Degenerate tensors (all zero / no finite value) go through max: the plan then keeps them
    // in float with a reason.
    result.amax = range.amax;
    result.lo = -range.amax;
    result.hi = range.amax;
    return result;
  }
  QK_RETURN_IF_NOT(collector.has_histogram(), StatusCode::kInternal,
                   "method '{}' needs a histogram; the statistics were collected for max only",
                   MethodLabel(method));
  const Histogram hist = collector.histogram().RebinAbs(kDefaultNumBins, range.amax);
  QK_ASSIGN_OR_RETURN(result, AmaxFromHistogram(hist, range.amax, method));
  // A threshold at edge 0 (everything in the first bin) is no range at all: use the exact max.
  if (!(result.amax > 0.0f)) result.amax = range.amax;
  result.amax = std::min(result.amax, range.amax);
  return result;
}

}  // namespace quantkit::quant
