// Per-channel symmetric int8 weight scales, as TensorRT computes them for implicit INT8 and as
// qdq-translator verifies them (calibration-spec §5): scale[c] = max|w[c, ...]| / 127.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::quant {

// A channel whose weights are all zero gets this scale: any positive value quantizes it to 0 and
// TensorRT rejects non-positive scales (pytorch-quantization substitutes 1.0 the same way).
inline constexpr float kZeroChannelScale = 1.0f;
// The smallest scale a channel keeps: below it (zero or denormal) the channel is a zero channel.
inline constexpr float kMinNormalScale = std::numeric_limits<float>::min();

// max |w| over every axis but `axis` (axis -1: one value over the whole tensor).
// Fails, naming `tensor`, on NaN/Inf weights or an axis out of range.
Result<std::vector<float>> PerChannelAbsMax(const float* data, const std::vector<int64_t>& dims,
                                            int64_t axis, const std::string& tensor);

// amax / 127 per channel, with kZeroChannelScale for all-zero channels and for channels whose
// scale would be denormal (max |w| < 127 * FLT_MIN): their weights quantize to 0 either way.
std::vector<float> WeightScalesFromAmax(const std::vector<float>& amax);

}  // namespace quantkit::quant
