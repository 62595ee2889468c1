// `quantkit cache inspect | diff | check`: make the undocumented TensorRT cache readable.
//   inspect  decoded header (TensorRT version, calibrator) and every entry's scale and amax
//   diff     entries added, removed, or changed by more than a relative tolerance
//   check    against a model: activation tensors TensorRT will quantize that lack a scale
//            (TensorRT warns "Missing scale and zero-point ... fall back to non-int8"), entries
//            that match no model tensor (stale names, e.g. after re-export), and a header whose
//            version or calibrator differs from the target (TensorRT then silently recalibrates)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/trt_cache.h"
#include "ir/graph.h"

namespace quantkit::pipelines {

// Entries whose scale is NaN, infinite, negative, zero or denormal (formats::ScaleProblem);
// inspect flags each one and exits 1 when there are any.
int CountBadScales(const formats::TrtCache& cache);
std::string InspectCacheText(const formats::TrtCache& cache);
std::string InspectCacheJson(const formats::TrtCache& cache);

struct CacheDiff {
  std::vector<std::string> added;    // in B only
  std::vector<std::string> removed;  // in A only
  struct Change {
    std::string tensor;
    float scale_a = 0, scale_b = 0;
    double rel = 0;
  };
  std::vector<Change> changed;  // |b-a|/|a| > rtol
  bool header_differs = false;
  bool empty() const {
    return added.empty() && removed.empty() && changed.empty() && !header_differs;
  }
};
CacheDiff DiffCaches(const formats::TrtCache& a, const formats::TrtCache& b, double rtol);
std::string FormatCacheDiff(const CacheDiff& d, const formats::TrtCache& a,
                            const formats::TrtCache& b);

struct CacheCheck {
  std::vector<std::string> missing;  // quantizable activations without a scale
  std::vector<std::string> stale;    // entries matching no model tensor
  std::vector<std::string> header_issues;
  std::vector<std::string> bad_scales;  // "tensor: scale is denormal" (formats::ScaleProblem)
  int matched = 0;
  bool ok() const {
    return missing.empty() && stale.empty() && header_issues.empty() && bad_scales.empty();
  }
};
// `target` (optional) is the TensorRT version the cache will be used with.
Result<CacheCheck> CheckCache(const formats::TrtCache& cache, const ir::Graph& model,
                              const std::optional<formats::TrtVersion>& target,
                              const std::optional<formats::TrtCalibrator>& calibrator);
std::string FormatCacheCheck(const CacheCheck& c);

}  // namespace quantkit::pipelines
