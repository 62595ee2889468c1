// Small statistics used by `quantkit diagnose` (pure functions, no model, no ATen): quantiles,
// coefficient of variation, robust z-scores and a Jensen-Shannon divergence between two tensors'
// histograms on a common binning (the share of values a threshold clips is quant::ShareAbove,
// quant/collectors/histogram.h, which calibration reports too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/collectors/histogram.h"

namespace quantkit::pipelines {

// One thing diagnose noticed. `code` is stable (docs/diagnose.md lists them; tests and scripts
// match on it); `severity` is "error", "warning" or "info" — a clean bill has no error/warning.
struct Finding {
  std::string code;
  std::string severity;
  std::string subject;  // tensor, input or "model"/"data"
  std::string message;
};

// Linear-interpolated quantile (numpy's default) of `v`, q in [0, 1]; NaN for an empty vector.
double Quantile(std::vector<double> v, double q);
double Median(std::vector<double> v);
// Standard deviation / |mean| (population std); 0 when fewer than two values or mean == 0.
double CoefficientOfVariation(const std::vector<double>& v);
// 0.6745 (x - median) / MAD (Iglewicz-Hoaglin). A zero MAD falls back to the mean absolute
// deviation (x 1.2533, its normal-consistency factor); all zeros when the values are all equal.
std::vector<double> RobustZ(const std::vector<double>& v);
// Same, but measured against the median/MAD of `base` (how far new values lie from a set).
std::vector<double> RobustZAgainst(const std::vector<double>& values,
                                   const std::vector<double>& base);

// Jensen-Shannon divergence in bits (0 = identical, 1 = disjoint) between the signed value
// distributions of two histograms, both re-binned over (-t, t), t = the larger of the two
// ranges, into min(`bins`, max(16, sqrt(fewer values))) bins (so small tensors are not judged
// shifted by sampling noise alone). 0 when either is empty.
double JensenShannonBits(const quant::StreamingHistogram& a, float a_range,
                         const quant::StreamingHistogram& b, float b_range, int64_t bins = 256);

}  // namespace quantkit::pipelines
