// The one rule quantkit uses to turn an asymmetric (uint8, or non-zero zero point) quantization
// into the symmetric int8 TensorRT requires, and what that costs.
//
//   source grid:   real = s * (q - z),  q in [qmin, qmax]      -> range [lo, hi] = [s*(qmin-z),
//   s*(qmax-z)] int8 zp 0:     kept as is (TensorRT int8 with scale s covers [-128 s, 127 s]: the
//   same grid) otherwise:     amax = max(|lo|, |hi|),  s' = float32(amax) / 127,  zero point 0
//
// The new grid covers the whole old range (nothing is clipped), but its step s' is coarser:
//   scale_ratio   = s' / s                (> 1 means coarser steps)
//   bits_lost     = log2(scale_ratio)     (resolution lost, in bits)
//   wasted_share  = share of the 256 int8 codes whose values lie outside [lo, hi]
//   clipped_share = share of [lo, hi] that saturates: outside [-128.5 s', 127.5 s'] (0 by
//                   construction; reported so a reader sees it checked)
// A non-negative source range (lo >= 0, e.g. uint8 with zp 0 after Relu) is the worst case: s'
// = 255 s / 127, one bit lost, half the int8 codes (the negative ones) never used: the sign bit is
// wasted.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "quantkit/status.h"

namespace quantkit::quant {

struct SymmetricConversion {
  double lo = 0.0;  // source representable range
  double hi = 0.0;
  float scale_from = 0.0f;
  float scale_to = 0.0f;  // symmetric int8 scale (zero point 0)
  float amax = 0.0f;      // scale_to's range: 127 * scale_to
  double scale_ratio = 1.0;
  double bits_lost = 0.0;
  double wasted_share = 0.0;
  double clipped_share = 0.0;
  bool changed = false;          // false when the source already was int8 with zero point 0
  bool sign_bit_wasted = false;  // lo >= 0: all values non-negative
};

// kInvalidArgument for a non-finite or non-positive scale, a zero point outside the dtype's
// range, or a dtype other than int8/uint8.
Result<SymmetricConversion> ToSymmetricInt8(float scale, int32_t zero_point, ir::DType dtype);

}  // namespace quantkit::quant
