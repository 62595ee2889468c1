// The one vocabulary of calibration methods (docs/calibration-methods.md): the enum, the parser
// every entry point uses (CLI options, the public API, JSON), the label written into plans and
// reports, and the list of all methods. Nothing else spells method names.
//
//   max            exact max |x|
//   entropy        KL-divergence search (pytorch-quantization / TensorRT EntropyCalibration2)
//   percentile[:P] the P-th percentile of |x|, P in (0, 100], default 99.99
//   mse            the amax minimizing the quantization MSE on the histogram
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "quant/calibrators/calibrators.h"
#include "quantkit/status.h"

namespace quantkit::quant {

enum class CalibMethod { kMax, kEntropy, kPercentile, kMse };

struct MethodRequest {
  CalibMethod method = CalibMethod::kMax;
  double percentile = kPqDefaultPercentile;  // kPercentile only

  // Orders and compares by what the method computes (percentile only matters for kPercentile),
  // so results can be keyed by method (diagnose) rather than by a formatted label.
  std::tuple<CalibMethod, double> key() const {
    return {method, method == CalibMethod::kPercentile ? percentile : 0.0};
  }
  bool operator<(const MethodRequest& o) const { return key() < o.key(); }
  bool operator==(const MethodRequest& o) const { return key() == o.key(); }
};

// "max", "entropy", "percentile", "mse".
const char* CalibMethodName(CalibMethod m);
// "max", "entropy", "percentile" (99.99), "percentile:P" with P in (0, 100], "mse".
Result<MethodRequest> ParseMethod(const std::string& text);
// "percentile:99.99"; ParseMethod(MethodLabel(m)) == m.
std::string MethodLabel(const MethodRequest& m);
// Every method with its default parameter, in report order: max, entropy, percentile:99.99, mse.
std::vector<MethodRequest> AllMethods();
// The method with its default parameter.
MethodRequest DefaultRequest(CalibMethod m);

}  // namespace quantkit::quant
