// Test-vector plumbing shared by the quant tests: loading the histograms and data files of
// ../shared/testvectors into quant types.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "quant/histogram.h"
#include "testing/testvectors.h"

namespace quantkit::quant::tv {

// Fails the current test (not skip) when the vectors are missing.
inline std::string Dir() {
  const std::string dir = testing::FindTestVectorsDir();
  if (dir.empty()) {
    ADD_FAILURE() << "calibration test vectors not found: set QK_TESTVECTORS_DIR or put shared/ "
                     "beside the checkout (tried $QK_TESTVECTORS_DIR, " QK_TESTVECTORS_DIR
                     ", /work/shared/testvectors)";
  }
  return dir;
}

inline Histogram HistogramFromJson(const nlohmann::json& j) {
  Histogram h;
  h.counts = j.at("counts").get<std::vector<int64_t>>();
  h.edges = j.at("edges").get<std::vector<double>>();
  h.edge_dtype = j.at("edge_dtype") == "float64" ? EdgeDType::kFloat64 : EdgeDType::kFloat32;
  if (j.contains("observed_min")) h.observed_min = j.at("observed_min").get<double>();
  if (j.contains("observed_max")) h.observed_max = j.at("observed_max").get<double>();
  return h;
}

// id -> histogram for every histogram in tv<k>_histograms.json.
inline std::map<std::string, Histogram> LoadHistograms(const std::string& dir, int vector) {
  std::map<std::string, Histogram> out;
  const nlohmann::json j =
      testing::LoadJson(dir + "/tv" + std::to_string(vector) + "_histograms.json");
  if (j.is_discarded()) return out;
  for (const auto& h : j.at("histograms"))
    out[h.at("id").get<std::string>()] = HistogramFromJson(h);
  return out;
}

// TV3: the |x| histogram (edges k/256) and its two signed variants (tv3_input.json rules).
inline std::map<std::string, Histogram> Tv3Histograms(const std::string& dir) {
  std::map<std::string, Histogram> out;
  const std::vector<int64_t> c = testing::LoadI64(dir + "/tv3_counts.i64le.bin");
  const int64_t n = static_cast<int64_t>(c.size());
  Histogram abs;
  abs.counts = c;
  for (int64_t k = 0; k <= n; ++k) abs.edges.push_back(static_cast<double>(k) / 256.0);
  out["tv3"] = abs;
  Histogram ort;  // reverse(H) ++ H on [-8, 8]
  ort.counts.assign(c.rbegin(), c.rend());
  ort.counts.insert(ort.counts.end(), c.begin(), c.end());
  for (int64_t k = 0; k <= 2 * n; ++k) {
    ort.edges.push_back(static_cast<float>(static_cast<double>(k - n) / 256.0));
  }
  ort.observed_min = -8.0;
  ort.observed_max = 8.0;
  out["signed_variants.onnxruntime_4096"] = ort;
  Histogram odd;  // H[n-1..1], H[0], H[1..n-1]
  for (int64_t k = n - 1; k >= 1; --k) odd.counts.push_back(c[static_cast<size_t>(k)]);
  odd.counts.insert(odd.counts.end(), c.begin(), c.end());
  for (int64_t k = 0; k <= 2 * n - 1; ++k) {
    odd.edges.push_back(static_cast<float>((static_cast<double>(k) - (n - 0.5)) / 256.0));
  }
  out["signed_variants.cpp_minimize_kl_4095"] = odd;
  return out;
}

}  // namespace quantkit::quant::tv
