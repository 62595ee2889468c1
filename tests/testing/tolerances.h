// Named test tolerances, each with its reason (style.md §11). Add yours here.
#pragma once

namespace quantkit::testing {

// Reference calibrators return histogram edges; ours must return the same float32 bits
// (testvectors/README.md "tolerance policy"): no tolerance.
inline constexpr float kEdgeExact = 0.0f;

// pytorch-quantization MSE runs a GPU reduction; the expected values use numpy's pairwise mean.
// The README allows the argmin to move to an adjacent bin when both MSE values agree within
// float32 rounding of the mean (relative).
inline constexpr double kMseNearTieRelative = 1e-6;

// Re-binning the partition-invariant streaming histogram into 2048 reference bins moves each
// value by at most half a fine bin, so a threshold may move by a few reference bins. Allowed
// relative deviation of the TV2 thresholds against the one-shot reference histogram (the
// measured numbers are in docs/histogram-policy.md).
inline constexpr double kRebinThresholdRelative = 0.02;

}  // namespace quantkit::testing
