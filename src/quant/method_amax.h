// Turns a tensor's collected statistics into the amax of a calibration method, the way
// `quantkit calibrate` does for every activation:
//   max             exact max |x| over the finite values
//   entropy         pytorch-quantization / TensorRT-style KL search on a 2048-bin |x|
//                   histogram over [0, amax] (re-binned from the streaming histogram)
//   percentile:P    pytorch-quantization percentile P on the same histogram
//   mse             pytorch-quantization MSE on the same histogram
// The histogram-based methods never return more than the exact amax.
#pragma once

#include <string>

#include "quant/calibrators/calibrators.h"
#include "quant/collectors/tensor_collector.h"
#include "quant/method.h"
#include "quantkit/status.h"

namespace quantkit::quant {

// The one method switch: the amax `method` gives on `hist` (an |x| histogram); `exact_amax` (the
// exact max |x|) is the answer for max. Shared by calibration (streaming histograms, below) and
// `tensor-calib` (the reference histogram of one tensor).
Result<CalibResult> AmaxFromHistogram(const Histogram& hist, float exact_amax,
                                      const MethodRequest& method);

Result<CalibResult> AmaxFromCollector(const TensorCollector& collector,
                                      const MethodRequest& method);

}  // namespace quantkit::quant
