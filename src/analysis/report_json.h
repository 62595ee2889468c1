// The pieces analyze's reports share (layer_analysis.cc, float_layers.cc): internal to qk_analysis,
// which links nlohmann_json privately.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/layer_analysis.h"

namespace quantkit::analysis::report {

inline std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// JSON has no infinity: an exact match is reported as null SQNR.
inline nlohmann::json Num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

inline nlohmann::json ErrorJson(const ErrorSummary& e) {
  return {{"sqnr_db", Num(e.sqnr_db)}, {"cosine", Num(e.cosine)}, {"rel_mse", Num(e.rel_mse)}};
}

}  // namespace quantkit::analysis::report
