// Calibrators: pure functions from statistics (a Histogram, or exact range statistics) to a
// clipping threshold. Each reproduces one reference implementation bit for bit
// (calibration-spec.md §2-§3, checked against ../shared/testvectors); variants are options.
// docs/calibration-methods.md explains each method, its reference and its option.
//
// Every function returns the chosen threshold plus the whole candidate curve (for plotting).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/histogram.h"
#include "quant/span.h"
#include "quantkit/status.h"

namespace quantkit::quant {

inline constexpr int64_t kDefaultNumBins = 2048;  // pytorch-quantization / TensorRT
inline constexpr int64_t kEntropyStartBin = 128;  // first candidate of the 2048-bin search
inline constexpr int kDefaultNumBits = 8;
inline constexpr double kSmoothEps = 1e-4;          // onnxruntime / MXNet smooth_distribution
inline constexpr int64_t kOrtDefaultNumBins = 128;  // onnxruntime create_calibrator(Entropy)
inline constexpr int64_t kOrtDefaultNumQuantizedBins = 128;
inline constexpr int64_t kMinimizeKlNumBins = 8001;  // TVM / MXNet signed histogram
inline constexpr int64_t kMinimizeKlNumQuantizedBins = 255;
inline constexpr double kPqDefaultPercentile = 99.99;    // pytorch-quantization default
inline constexpr double kOrtDefaultPercentile = 99.999;  // onnxruntime create_calibrator default

struct CalibResult {
  float amax = 0.0f;  // symmetric threshold = max(|lo|, |hi|)
  float lo = 0.0f;    // range as the reference returns it (symmetric methods: -amax, amax)
  float hi = 0.0f;
  int64_t index = -1;  // chosen edge (entropy, percentile) or bin centre (MSE); -1 if n/a
  // Candidate curve: threshold of each candidate and its score (KL divergence, MSE, or cdf).
  std::vector<double> candidate_threshold;
  std::vector<double> candidate_score;
};

// --- Entropy, pytorch-quantization `_compute_amax_entropy` (spec §2.2) ------------------------
// kLeftEdge: amax = E[i*] (pytorch-quantization). kBinCentre: amax = E[0] + (i* + 0.5) w, the
// TensorRT EntropyCalibration2 rule inferred from real caches (spec §2.1; a hypothesis).
enum class EntropyThresholdRule { kLeftEdge, kBinCentre };

struct EntropyOptions {
  int num_bits = kDefaultNumBits;
  bool is_unsigned = false;  // 2^(num_bits-1+unsigned) levels: 128 signed, 256 unsigned
  int64_t start_bin = kEntropyStartBin;
  int64_t stride = 1;
  EntropyThresholdRule rule = EntropyThresholdRule::kLeftEdge;
};

// Expects an |x| histogram (pytorch-quantization style). O(levels) per candidate plus an exact
// float64 re-evaluation (scipy order) of the candidates within rounding of the minimum.
Result<CalibResult> EntropyAmax(const Histogram& hist, const EntropyOptions& options);

// --- Entropy, onnxruntime `get_entropy_threshold` (spec §2.3) ---------------------------------
enum class KlPrecision {
  kFloat32,  // newer onnxruntime: in-tree float32 entropy (numpy pairwise sums)
  kFloat64,  // older onnxruntime: scipy.stats.entropy
};

struct OrtEntropyOptions {
  int64_t num_quantized_bins = kOrtDefaultNumQuantizedBins;
  KlPrecision kl = KlPrecision::kFloat32;
};

// Expects a signed histogram over (-T, T). Returns (lo, hi) clipped to the observed min/max when
// the histogram carries them.
Result<CalibResult> OrtEntropyRange(const Histogram& hist, const OrtEntropyOptions& options);

// --- Entropy, MXNet / TVM `MinimizeKL` (spec §2.4, §2.5) --------------------------------------
enum class MinimizeKlVariant {
  kCpp,      // MXNet >= 1.6 calibrate.cc and TVM relay calibrate.cc (float32, first bin excluded)
  kMxnet15,  // MXNet 1.4-1.5 python (float64 KL, Q[P==0] = 0)
};

struct MinimizeKlOptions {
  int64_t num_quantized_bins = kMinimizeKlNumQuantizedBins;
  MinimizeKlVariant variant = MinimizeKlVariant::kCpp;
};

// Expects a signed histogram with an odd bin count. Returns the positive edge E[z+i*+1].
// TVM divides this threshold by 128 for its scale; quantkit reports the threshold itself.
Result<CalibResult> MinimizeKlThreshold(const Histogram& hist, const MinimizeKlOptions& options);

// --- Percentile (spec §3.2) -------------------------------------------------------------------
enum class PercentileFlavor {
  kPytorchQuantization,  // |x| histogram, amax = E[idx]
  kOrtSymmetric,         // |x| histogram, (-E[idx], E[idx]) clipped to observed min/max
  kOrtAsymmetric,        // signed histogram, (E[left], E[right]) clipped to observed min/max
};

struct PercentileOptions {
  double percentile = kPqDefaultPercentile;  // in percent, [0, 100]
  PercentileFlavor flavor = PercentileFlavor::kPytorchQuantization;
  // false (reference): cdf = running float64 sum of H[k]/total. true: prefix_count/total, which
  // avoids the float64 rounding trap of spec §3.2 but no longer matches the references.
  bool exact_count_cdf = false;
};

Result<CalibResult> PercentileAmax(const Histogram& hist, const PercentileOptions& options);

// TVM `_find_scale_by_percentile`: the k-th smallest |x|, k = int(N * fraction) (no histogram).
Result<float> ExactPercentileAbs(FloatSpan values, double fraction);

// --- MSE, pytorch-quantization `_compute_amax_mse` (spec §3.3) ---------------------------------
struct MseOptions {
  int num_bits = kDefaultNumBits;
  bool is_unsigned = false;
  int64_t start_bin = kEntropyStartBin;
  int64_t stride = 1;
};

// float32 arithmetic as the CUDA kernel; amax = the centre of the first argmin bin.
Result<CalibResult> MseAmax(const Histogram& hist, const MseOptions& options);

}  // namespace quantkit::quant
