#include "pipelines/cache_tools.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/text.h"
#include "formats/scale_problem.h"
#include "ir/scopes.h"
#include "passes/qdq_placement.h"

namespace quantkit::pipelines {
namespace {

std::string HeaderMeaning(const formats::TrtCache& cache) {
  return fmt::format(
      "TRT-{}-{}: written for TensorRT {} with {}", cache.version_number, cache.algorithm,
      formats::TrtVersionFromHeaderNumber(cache.version_number).ToString(), cache.algorithm);
}

}  // namespace

int CountBadScales(const formats::TrtCache& cache) {
  int n = 0;
  for (const auto& [name, s] : cache.scales) n += formats::ScaleProblem(s) ? 1 : 0;
  return n;
}

std::string InspectCacheText(const formats::TrtCache& cache) {
  std::string out = EscapeControl(HeaderMeaning(cache)) + "\n";
  out += fmt::format("{} entries (scale = amax/127)\n", cache.scales.size());
  size_t width = 6;
  for (const auto& [name, s] : cache.scales) width = std::max(width, EscapeControl(name).size());
  out += fmt::format("{:<{}}  {:>8}  {:>14}  {:>14}\n", "tensor", width, "hex", "scale", "amax");
  for (const auto& [name, s] : cache.scales) {
    const char* problem = formats::ScaleProblem(s);
    out += fmt::format("{:<{}}  {:>8}  {:>14.8g}  {:>14.8g}{}\n", EscapeControl(name), width,
                       formats::EncodeScaleHex(s), s, static_cast<double>(s) * 127.0,
                       problem ? fmt::format("  <- {} scale: not usable", problem) : "");
  }
  if (const int bad = CountBadScales(cache)) {
    out +=
        fmt::format("{} of {} scales are not positive normal floats (TensorRT cannot use them)\n",
                    bad, cache.scales.size());
  }
  return out;
}

std::string InspectCacheJson(const formats::TrtCache& cache) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [name, s] : cache.scales) {
    const char* problem = formats::ScaleProblem(s);
    // JSON has no NaN/Inf: such scales are written as null, with the problem beside them.
    const bool finite = std::isfinite(s);
    entries.push_back(
        {{"tensor", name},
         {"hex", formats::EncodeScaleHex(s)},
         {"scale", finite ? nlohmann::json(s) : nlohmann::json()},
         {"amax", finite ? nlohmann::json(static_cast<double>(s) * 127.0) : nlohmann::json()},
         {"problem", problem ? nlohmann::json(problem) : nlohmann::json()}});
  }
  nlohmann::json j{
      {"header",
       {{"version_number", cache.version_number},
        {"tensorrt", formats::TrtVersionFromHeaderNumber(cache.version_number).ToString()},
        {"algorithm", cache.algorithm}}},
      {"entries", entries}};
  return j.dump(1) + "\n";
}

CacheDiff DiffCaches(const formats::TrtCache& a, const formats::TrtCache& b, double rtol) {
  CacheDiff d;
  d.header_differs = a.version_number != b.version_number || a.algorithm != b.algorithm;
  std::map<std::string, float> ma(a.scales.begin(), a.scales.end());
  std::map<std::string, float> mb(b.scales.begin(), b.scales.end());
  for (const auto& [name, sa] : ma) {
    auto it = mb.find(name);
    if (it == mb.end()) {
      d.removed.push_back(name);
      continue;
    }
    const double rel = std::fabs(static_cast<double>(it->second) - sa) /
                       std::max(std::fabs(static_cast<double>(sa)), 1e-30);
    if (rel > rtol) d.changed.push_back({name, sa, it->second, rel});
  }
  for (const auto& [name, sb] : mb) {
    if (!ma.count(name)) d.added.push_back(name);
  }
  return d;
}

std::string FormatCacheDiff(const CacheDiff& d, const formats::TrtCache& a,
                            const formats::TrtCache& b) {
  std::string out;
  if (d.header_differs) {
    out += fmt::format("header: TRT-{}-{} -> TRT-{}-{}\n", a.version_number, a.algorithm,
                       b.version_number, b.algorithm);
  }
  for (const auto& n : d.removed) out += "- " + EscapeControl(n) + "\n";
  for (const auto& n : d.added) out += "+ " + EscapeControl(n) + "\n";
  for (const auto& c : d.changed) {
    out += fmt::format("~ {}: amax {:.6g} -> {:.6g} ({:+.2f}%)\n", EscapeControl(c.tensor),
                       c.scale_a * 127.0, c.scale_b * 127.0,
                       100.0 * (c.scale_b - c.scale_a) / c.scale_a);
  }
  out += fmt::format("{} removed, {} added, {} changed{}\n", d.removed.size(), d.added.size(),
                     d.changed.size(), d.header_differs ? ", header differs" : "");
  return out;
}

Result<CacheCheck> CheckCache(const formats::TrtCache& cache, const ir::Graph& model,
                              const std::optional<formats::TrtVersion>& target,
                              const std::optional<formats::TrtCalibrator>& calibrator) {
  CacheCheck c;
  std::map<std::string, float> entries(cache.scales.begin(), cache.scales.end());
  for (const auto& [name, s] : entries) {
    if (ir::FindQualifiedValue(model, name)) {
      ++c.matched;
    } else {
      c.stale.push_back(name);
    }
  }
  for (const auto& [name, s] : cache.scales) {
    if (const char* problem = formats::ScaleProblem(s)) {
      c.bad_scales.push_back(fmt::format("{}: scale {} is {}", name, s, problem));
    }
  }
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites, passes::FindQdqSites(model, {}));
  for (const std::string& t : passes::ActivationTensors(sites)) {
    if (!entries.count(t)) c.missing.push_back(t);
  }
  if (target && target->HeaderNumber() != cache.version_number) {
    c.header_issues.push_back(fmt::format(
        "header is for TensorRT {} (TRT-{}) but the target is {} (TRT-{}): TensorRT ignores the "
        "cache and recalibrates; rewrite it with quantkit convert --trt-version {}",
        formats::TrtVersionFromHeaderNumber(cache.version_number).ToString(), cache.version_number,
        target->ToString(), target->HeaderNumber(), target->ToString()));
  }
  if (calibrator && formats::TrtCalibratorName(*calibrator) != cache.algorithm) {
    c.header_issues.push_back(fmt::format(
        "header calibrator is {} but the build uses {}: TensorRT rejects the cache (\"does not "
        "match calibrator algorithm type\")",
        cache.algorithm, formats::TrtCalibratorName(*calibrator)));
  }
  return c;
}

std::string FormatCacheCheck(const CacheCheck& c) {
  std::string out;
  for (const auto& h : c.header_issues) out += "error: " + EscapeControl(h) + "\n";
  for (const auto& b : c.bad_scales) {
    out += "error: " + EscapeControl(b) + " (TensorRT needs a positive normal float)\n";
  }
  for (const auto& m : c.missing) {
    out += "missing: " + EscapeControl(m) +
           " (TensorRT falls back to higher precision for its layers)\n";
  }
  for (const auto& s : c.stale)
    out += "stale: " + EscapeControl(s) + " (no such tensor in the model)\n";
  out += fmt::format(
      "{} entries match the model, {} missing, {} stale, {} header issues, {} bad scales\n",
      c.matched, c.missing.size(), c.stale.size(), c.header_issues.size(), c.bad_scales.size());
  return out;
}

}  // namespace quantkit::pipelines
