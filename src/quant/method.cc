#include "quant/method.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/check.h"

namespace quantkit::quant {
namespace {

constexpr char kPercentilePrefix[] = "percentile:";
constexpr CalibMethod kAll[] = {CalibMethod::kMax, CalibMethod::kEntropy, CalibMethod::kPercentile,
                                CalibMethod::kMse};

}  // namespace

const char* CalibMethodName(CalibMethod m) {
  switch (m) {
    case CalibMethod::kMax:
      return "max";
    case CalibMethod::kEntropy:
      return "entropy";
    case CalibMethod::kPercentile:
      return "percentile";
    case CalibMethod::kMse:
      return "mse";
  }
  return "unknown";
}

MethodRequest DefaultRequest(CalibMethod m) { return MethodRequest{m, kPqDefaultPercentile}; }

std::vector<MethodRequest> AllMethods() {
  std::vector<MethodRequest> all;
  for (CalibMethod m : kAll) all.push_back(DefaultRequest(m));
  return all;
}

Result<MethodRequest> ParseMethod(const std::string& text) {
  for (CalibMethod m : kAll) {
    if (text == CalibMethodName(m)) return DefaultRequest(m);
  }
  const std::string prefix = kPercentilePrefix;
  if (text.rfind(prefix, 0) == 0) {
    const std::string p = text.substr(prefix.size());
    if (p.empty()) return DefaultRequest(CalibMethod::kPercentile);
    char* end = nullptr;
    const double percentile = std::strtod(p.c_str(), &end);
    QK_RETURN_IF_NOT(end == p.c_str() + p.size() && percentile > 0 && percentile <= 100,
                     StatusCode::kInvalidArgument,
                     "bad percentile '{}' in '{}': want a number in (0, 100]", p, text);
    return MethodRequest{CalibMethod::kPercentile, percentile};
  }
  return MakeStatus(StatusCode::kInvalidArgument,
                    "unknown calibration method '{}' (max, entropy, percentile[:P], mse)", text);
}

std::string MethodLabel(const MethodRequest& m) {
  if (m.method == CalibMethod::kPercentile) return fmt::format("percentile:{}", m.percentile);
  return CalibMethodName(m.method);
}

}  // namespace quantkit::quant
