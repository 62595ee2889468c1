// One-tensor calibration report (the `quantkit tensor-calib` command): range statistics, a
// histogram summary and the amax of each requested method, computed on the pytorch-quantization
// reference histogram (np.histogram(|x|, 2048) over [min|x|, max|x|]) so the numbers match
// pytorch-quantization for the same tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/collectors/range.h"
#include "quant/method.h"
#include "quant/span.h"
#include "quantkit/status.h"

namespace quantkit::quant {

// Histogram bins: entropy's search is quadratic in them and the counts take 8 bytes each, so the
// upper bound keeps one call within seconds and megabytes (--bins 1e10 asked for 80 GB).
inline constexpr int64_t kMinNumBins = 1;
inline constexpr int64_t kMaxNumBins = 65536;

struct TensorCalibOptions {
  std::vector<MethodRequest> methods;
  int64_t num_bins = 2048;  // in [kMinNumBins, kMaxNumBins]
};

struct MethodAmax {
  MethodRequest request;
  float amax = 0.0f;
  int64_t index = -1;         // histogram edge/centre index; -1 for max
  std::string trt_scale_hex;  // EncodeTrtScaleHex(amax)
};

struct TensorCalibReport {
  RangeStats range;
  int64_t num_bins = 0;
  int64_t nonempty_bins = 0;
  double hist_first_edge = 0.0;
  double hist_last_edge = 0.0;
  std::vector<MethodAmax> results;
};

Result<TensorCalibReport> CalibrateTensor(FloatSpan values, const TensorCalibOptions& options);

}  // namespace quantkit::quant
