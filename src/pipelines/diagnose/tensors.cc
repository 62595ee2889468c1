// Per-tensor part of `diagnose`: all from the chunk collectors, no model run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/check.h"
#include "pipelines/diagnose/internal.h"
#include "quant/method_amax.h"

namespace quantkit::pipelines::diagnose_internal {
namespace {

// amax of a method; 0 for a tensor without finite non-zero values (nothing to calibrate).
Result<float> AmaxOf(const quant::TensorCollector& c, const quant::MethodRequest& m) {
  if (c.range().finite_count() == 0 || c.range().amax == 0.0f) return 0.0f;
  QK_ASSIGN_OR_RETURN(quant::CalibResult r, quant::AmaxFromCollector(c, m));
  return r.amax;
}

Result<quant::TensorCollector> MergeOf(const std::vector<const quant::TensorCollector*>& chunks,
                                       const std::vector<int>& which) {
  quant::TensorCollector merged;
  for (int i : which) QK_RETURN_IF_ERROR(merged.Merge(*chunks[static_cast<size_t>(i)]));
  return merged;
}

}  // namespace

Resampling MakeResampling(int chunks, int bootstrap, int subsets, uint64_t seed) {
  Resampling r;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, std::max(chunks - 1, 0));
  if (chunks >= 2) {
    for (int b = 0; b < bootstrap; ++b) {
      std::vector<int> d(static_cast<size_t>(chunks));
      for (int& x : d) x = pick(rng);
      r.draws.push_back(std::move(d));
    }
    std::vector<int> all(static_cast<size_t>(chunks));
    std::iota(all.begin(), all.end(), 0);
    for (int s = 0; s < subsets; ++s) {
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<int> half(all.begin(), all.begin() + chunks / 2);
      std::sort(half.begin(), half.end());
      r.subsets.push_back(std::move(half));
    }
  }
  return r;
}

Result<TensorDiagnosis> AnalyzeTensor(const std::string& name,
                                      const std::vector<const quant::TensorCollector*>& chunks,
                                      const std::vector<int64_t>& chunk_end_samples,
                                      const Resampling& resampling,
                                      const quant::MethodRequest& method,
                                      const std::vector<float>& channel_amax,
                                      quant::TensorCollector* full) {
  TensorDiagnosis t;
  t.name = name;
  // Convergence: amax of each prefix of chunks (exact, thanks to mergeable collectors).
  quant::TensorCollector prefix;
  for (size_t i = 0; i < chunks.size(); ++i) {
    QK_RETURN_IF_ERROR(prefix.Merge(*chunks[i]));
    QK_ASSIGN_OR_RETURN(float a, AmaxOf(prefix, method));
    t.convergence.emplace_back(chunk_end_samples[i], a);
  }
  *full = prefix;
  t.range = full->range();
  QK_ASSIGN_OR_RETURN(t.amax, AmaxOf(*full, method));
  const std::vector<quant::MethodRequest> methods = quant::AllMethods();
  for (const quant::MethodRequest& m : methods) {
    QK_ASSIGN_OR_RETURN(t.method_amax[m], AmaxOf(*full, m));
  }
  t.method_amax[method] = t.amax;

  // Bootstrap 95% interval of the chosen method's amax.
  if (!resampling.draws.empty() && t.amax > 0) {
    std::vector<double> boot;
    for (const std::vector<int>& d : resampling.draws) {
      QK_ASSIGN_OR_RETURN(quant::TensorCollector m, MergeOf(chunks, d));
      QK_ASSIGN_OR_RETURN(float a, AmaxOf(m, method));
      boot.push_back(a);
    }
    t.ci_low = static_cast<float>(Quantile(boot, 0.025));
    t.ci_high = static_cast<float>(Quantile(boot, 0.975));
    t.ci_rel = (static_cast<double>(t.ci_high) - t.ci_low) / 2.0 / t.amax;
  } else {
    t.ci_low = t.ci_high = t.amax;
    t.ci_rel = resampling.draws.empty() ? std::numeric_limits<double>::infinity() : 0.0;
  }
  // Stability: CV of each method's amax over random half-subsets of the chunks.
  if (!resampling.subsets.empty() && t.amax > 0) {
    std::vector<quant::MethodRequest> cv_methods = methods;
    if (std::find(methods.begin(), methods.end(), method) == methods.end())
      cv_methods.push_back(method);
    std::map<quant::MethodRequest, std::vector<double>> values;
    for (const std::vector<int>& s : resampling.subsets) {
      QK_ASSIGN_OR_RETURN(quant::TensorCollector m, MergeOf(chunks, s));
      for (const quant::MethodRequest& mr : cv_methods) {
        QK_ASSIGN_OR_RETURN(float a, AmaxOf(m, mr));
        values[mr].push_back(a);
      }
    }
    for (const auto& [m, v] : values) t.cv[m] = CoefficientOfVariation(v);
  }

  // Degenerate statistics.
  t.channels = static_cast<int64_t>(channel_amax.size());
  t.dead_channels = std::count(channel_amax.begin(), channel_amax.end(), 0.0f);
  const float p9999 = t.method_amax[quant::DefaultRequest(quant::CalibMethod::kPercentile)];
  t.outlier_ratio = p9999 > 0 ? t.range.amax / p9999 : 1.0;
  const float entropy = t.method_amax[quant::DefaultRequest(quant::CalibMethod::kEntropy)];
  // Only a real cut counts: entropy a little below max clipping a thin tail is its design.
  t.entropy_clip_share = entropy > 0 && entropy < kEntropyClipAmaxRatio * t.range.amax
                             ? quant::ShareAbove(full->histogram(), entropy)
                             : 0.0;
  t.clip_share = t.amax > 0 ? quant::ShareAbove(full->histogram(), t.amax) : 0.0;
  if (!full->histogram().empty_range() && t.range.amax > 0) {
    t.abs_hist = full->histogram().RebinAbs(kHistogramBins, t.range.amax).counts;
  }

  // Recommended method, most serious reason first.
  const int64_t nonfinite = t.range.nan_count + t.range.posinf_count + t.range.neginf_count;
  if (nonfinite > 0) {
    t.recommended_method = "fix";
    t.recommendation = "NaN/Inf values: fix the model or the data before calibrating";
  } else if (t.range.finite_count() == 0 || t.range.amax == 0.0f || t.range.min == t.range.max) {
    t.recommended_method = "float";
    t.recommendation = "never varies: nothing to calibrate (calibrate keeps it in float)";
  } else if (t.outlier_ratio > kOutlierRatio) {
    t.recommended_method = "percentile:99.99";
    t.recommendation = fmt::format(
        "a few extreme values set max ({:.4g} = {:.3g}x the 99.99th "
        "percentile): max would waste most of the int8 range",
        t.range.amax, t.outlier_ratio);
  } else if (t.entropy_clip_share > kEntropyClipShare) {
    t.recommended_method = "max";
    t.recommendation = fmt::format(
        "entropy would clip {:.2f}% of the values at {:.4g} (max {:.4g}); "
        "max or percentile keeps them",
        100.0 * t.entropy_clip_share, entropy, t.range.amax);
  } else {
    t.recommended_method = quant::MethodLabel(method);
    t.recommendation = "well-behaved";
  }
  return t;
}

void TensorFindings(const TensorDiagnosis& t, const quant::MethodRequest& method,
                    std::vector<Finding>* out) {
  const quant::RangeStats& r = t.range;
  const int64_t nonfinite = r.nan_count + r.posinf_count + r.neginf_count;
  auto add = [&](const char* code, const char* sev, std::string msg) {
    out->push_back({code, sev, t.name, std::move(msg)});
  };
  if (nonfinite > 0) {
    add("nonfinite", "error",
        fmt::format("tensor '{}': {} NaN, {} +Inf, {} -Inf of {} values", t.name, r.nan_count,
                    r.posinf_count, r.neginf_count, r.count));
  }
  if (r.count > 0 && (r.finite_count() == 0 || r.zero_count == r.count)) {
    add("all_zero", "warning",
        fmt::format("tensor '{}' is all zero over the calibration set", t.name));
  } else if (r.finite_count() > 0 && r.min == r.max) {
    add("constant_tensor", "warning",
        fmt::format("tensor '{}' is constant ({:.6g}) over the calibration set", t.name, r.min));
  }
  if (t.channels >= 2 && t.dead_channels > 0) {
    add("dead_channels", "info",
        fmt::format(
            "tensor '{}': {} of {} channels (axis 1) are zero for every sample (dead); they "
            "cost nothing in int8 but say the data never exercises them",
            t.name, t.dead_channels, t.channels));
  }
  const bool is_max = method.method == quant::CalibMethod::kMax;
  const bool is_entropy = method.method == quant::CalibMethod::kEntropy;
  if (t.outlier_ratio > kOutlierRatio) {
    add("outliers_dominate_max", is_max ? "warning" : "info",
        fmt::format("tensor '{}': max {:.4g} is {:.3g}x the 99.99th percentile {:.4g}; with max "
                    "calibration most int8 levels go unused; recommended: {}",
                    t.name, r.amax, t.outlier_ratio,
                    t.method_amax.at(quant::DefaultRequest(quant::CalibMethod::kPercentile)),
                    t.recommended_method));
  }
  if (t.entropy_clip_share > kEntropyClipShare) {
    add("entropy_clips", is_entropy ? "warning" : "info",
        fmt::format(
            "tensor '{}': entropy amax {:.4g} is {:.0f}% of max {:.4g} and clips {:.2f}% of the "
            "values (a dense spike below the max dominates the histogram); recommended: {}",
            t.name, t.method_amax.at(quant::DefaultRequest(quant::CalibMethod::kEntropy)),
            100.0 * t.method_amax.at(quant::DefaultRequest(quant::CalibMethod::kEntropy)) / r.amax,
            r.amax, 100.0 * t.entropy_clip_share, t.recommended_method));
  }
}

}  // namespace quantkit::pipelines::diagnose_internal
