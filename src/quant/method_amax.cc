#include "quant/method_amax.h"

#include <cmath>
#include <cstdlib>

#include "common/check.h"

namespace quantkit::quant {

Result<MethodRequest> ParseMethod(const std::string& text) {
  MethodRequest m;
  if (text == "max") {
    m.method = CalibMethod::kMax;
  } else if (text == "entropy") {
    m.method = CalibMethod::kEntropy;
  } else if (text == "mse") {
    m.method = CalibMethod::kMse;
  } else if (text == "percentile" || text.rfind("percentile:", 0) == 0) {
    m.method = CalibMethod::kPercentile;
    m.percentile = kPqDefaultPercentile;
    if (text.size() > std::string("percentile:").size()) {
      const std::string p = text.substr(std::string("percentile:").size());
      char* end = nullptr;
      m.percentile = std::strtod(p.c_str(), &end);
      QK_RETURN_IF_NOT(end == p.c_str() + p.size() && m.percentile > 0 && m.percentile <= 100,
                       StatusCode::kInvalidArgument,
                       "percentile '{}' is not a number in (0, 100]", p);
    }
  } else {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "unknown calibration method '{}' (max, entropy, percentile[:P], mse)", text);
  }
  return m;
}

std::string MethodLabel(const MethodRequest& m) {
  if (m.method == CalibMethod::kPercentile) return fmt::format("percentile:{}", m.percentile);
  return CalibMethodName(m.method);
}

Result<CalibResult> AmaxFromCollector(const TensorCollector& collector, const MethodRequest& method) {
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
  switch (method.method) {
    case CalibMethod::kEntropy: {
      QK_ASSIGN_OR_RETURN(result, EntropyAmax(hist, EntropyOptions{}));
      break;
    }
    case CalibMethod::kPercentile: {
      PercentileOptions options;
      options.percentile = method.percentile;
      QK_ASSIGN_OR_RETURN(result, PercentileAmax(hist, options));
      break;
    }
    case CalibMethod::kMse: {
      QK_ASSIGN_OR_RETURN(result, MseAmax(hist, MseOptions{}));
      break;
    }
    case CalibMethod::kMax: break;
  }
  // A threshold at edge 0 (everything in the first bin) is no range at all: use the exact max.
  if (!(result.amax > 0.0f)) result.amax = range.amax;
  result.amax = std::min(result.amax, range.amax);
  return result;
}

}  // namespace quantkit::quant
