// Why a scale read from a file cannot be used by TensorRT.
#pragma once

namespace quantkit::formats {

// nullptr for a positive normal float; otherwise "NaN", "infinite", "negative", "zero" or
// "denormal" (TensorRT flushes denormals to zero, and 1/scale overflows to Inf in a quantizer).
// Implemented in trt_cache.cc.
const char* ScaleProblem(float scale);

}  // namespace quantkit::formats
