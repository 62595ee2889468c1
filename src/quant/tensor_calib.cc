#include "quant/tensor_calib.h"

#include <cmath>
#include <vector>

#include "common/check.h"
#include "quant/calibrators/calibrators.h"
#include "quant/method_amax.h"
#include "quant/params.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {

Result<TensorCalibReport> CalibrateTensor(FloatSpan values, const TensorCalibOptions& options) {
  QK_RETURN_IF_NOT(options.num_bins >= kMinNumBins && options.num_bins <= kMaxNumBins,
                   StatusCode::kInvalidArgument, "{} histogram bins: expected {} to {}",
                   options.num_bins, kMinNumBins, kMaxNumBins);
  TensorCalibReport report;
  RangeCollector range;
  range.Observe(values);
  report.range = range.Finalize();
  QK_RETURN_IF_NOT(report.range.finite_count() > 0, StatusCode::kInvalidArgument,
                   "the tensor has no finite values ({} elements, {} NaN, {} Inf)",
                   report.range.count, report.range.nan_count,
                   report.range.posinf_count + report.range.neginf_count);
  // The reference histograms skip NaN; Inf would stretch the range to infinity, so drop both.
  std::vector<float> finite;
  FloatSpan data = values;
  if (report.range.finite_count() != report.range.count) {
    finite.reserve(static_cast<size_t>(report.range.finite_count()));
    for (float v : values) {
      if (std::isfinite(v)) finite.push_back(v);
    }
    data = FloatSpan(finite);
  }
  const Histogram hist = PqAbsHistogram(data, options.num_bins);
  report.num_bins = hist.num_bins();
  for (int64_t c : hist.counts) report.nonempty_bins += (c != 0);
  report.hist_first_edge = hist.edges.front();
  report.hist_last_edge = hist.edges.back();
  for (const MethodRequest& req : options.methods) {
    MethodAmax out;
    out.request = req;
    QK_ASSIGN_OR_RETURN(CalibResult r, AmaxFromHistogram(hist, report.range.amax, req));
    out.amax = r.amax;
    out.index = r.index;
    out.trt_scale_hex = EncodeTrtScaleHex(out.amax);
    report.results.push_back(out);
  }
  return report;
}

}  // namespace quantkit::quant
