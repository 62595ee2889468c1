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
#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit::quant {

// "max", "entropy", "percentile" (99.99), "percentile:99.9", "mse". Strings are parsed at the
// CLI boundary with this one function.
Result<MethodRequest> ParseMethod(const std::string& text);
std::string MethodLabel(const MethodRequest& m);  // "percentile:99.99"

Result<CalibResult> AmaxFromCollector(const TensorCollector& collector, const MethodRequest& method);

}  // namespace quantkit::quant
