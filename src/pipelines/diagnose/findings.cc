// diagnose's findings: the verdicts drawn from the analysed tensors, the batch check and the
// input statistics (docs/diagnose.md lists every code and threshold).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pipelines/diagnose/internal.h"
#include "quant/method.h"

namespace quantkit::pipelines::diagnose_internal {
namespace {

void SampleOutliers(const std::vector<InputStats>& sets, const std::vector<InputStats>* base,
                    std::vector<SampleOutlier>* out) {
  for (size_t i = 0; i < sets.size(); ++i) {
    const InputStats& s = sets[i];
    const std::vector<double>& bm = base ? (*base)[i].sample_mean : s.sample_mean;
    const std::vector<double>& bs = base ? (*base)[i].sample_std : s.sample_std;
    const std::vector<double> zm = RobustZAgainst(s.sample_mean, bm),
                              zs = RobustZAgainst(s.sample_std, bs);
    for (size_t k = 0; k < zm.size(); ++k) {
      if (std::fabs(zm[k]) > kSampleOutlierZ || std::fabs(zs[k]) > kSampleOutlierZ) {
        out->push_back({static_cast<int64_t>(k), s.input, zm[k], zs[k]});
      }
    }
  }
}

std::string Names(const std::vector<std::string>& v, size_t limit = 5) {  // "a, b (+3 more)"
  std::string s;
  for (size_t i = 0; i < v.size() && i < limit; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > limit) s += fmt::format(" (+{} more)", v.size() - limit);
  return s;
}

}  // namespace

void AddFindings(const DiagnoseOptions& o, DiagnoseResult* result) {
  DiagnoseResult& r = *result;
  const int64_t n = r.samples, k = r.chunk_size;
  std::vector<Finding>& F = r.findings;
  r.worst_ci_rel = 0;
  for (const TensorDiagnosis& t : r.tensors) {
    if (t.amax <= 0) continue;
    r.worst_ci_rel = std::max(r.worst_ci_rel, t.ci_rel);
    if (t.ci_rel > o.ci_tolerance) r.moving.push_back(t.name);
    auto cv = t.cv.find(r.chosen);
    if (cv != t.cv.end() && cv->second > o.cv_tolerance) r.unstable.push_back(t.name);
  }
  r.enough = r.moving.empty();
  {
    const double ratio = std::isfinite(r.worst_ci_rel) ? r.worst_ci_rel / o.ci_tolerance : 4.0;
    // The interval narrows like 1/sqrt(N): N' = N (width / tolerance)^2, rounded up to 32.
    const double want = static_cast<double>(n) * ratio * ratio;
    r.suggested_samples =
        std::max<int64_t>(k, (static_cast<int64_t>(std::ceil(want)) + 31) / 32 * 32);
    if (!r.enough) r.suggested_samples = std::max(r.suggested_samples, 2 * n);
  }
  auto moving_detail = [&]() {
    std::vector<const TensorDiagnosis*> v;
    for (const TensorDiagnosis& t : r.tensors) {
      if (t.amax > 0 && t.ci_rel > o.ci_tolerance) v.push_back(&t);
    }
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->ci_rel > b->ci_rel; });
    std::vector<std::string> s;
    for (auto* t : v) s.push_back(fmt::format("{} (+-{:.1f}%)", t->name, 100.0 * t->ci_rel));
    return Names(s);
  };
  if (r.enough) {
    F.push_back({"samples_enough", "info", "data",
                 fmt::format("{} samples enough: every quantized tensor's {} scale 95% interval is "
                             "within +-{:.1f}% (worst +-{:.2f}%); about {} would do",
                             n, r.method, 100.0 * o.ci_tolerance, 100.0 * r.worst_ci_rel,
                             std::min(n, r.suggested_samples))});
  } else {
    F.push_back(
        {"too_few_samples", "warning", "data",
         fmt::format("add samples: with {} samples these tensors' {} scale still moves beyond "
                     "+-{:.1f}% (95% interval): {}; suggested N >= {}",
                     n, r.method, 100.0 * o.ci_tolerance, moving_detail(), r.suggested_samples)});
  }
  if (!r.unstable.empty()) {
    F.push_back(
        {"unstable_scale", "warning", "data",
         fmt::format("{} scales change by more than {:.1f}% (coefficient of variation) between "
                     "halves of the data: {}",
                     r.method, 100.0 * o.cv_tolerance, Names(r.unstable))});
  }
  if (o.method.method != quant::CalibMethod::kEntropy) {
    std::vector<std::string> ent;
    for (const TensorDiagnosis& t : r.tensors) {
      auto it = t.cv.find(quant::DefaultRequest(quant::CalibMethod::kEntropy));
      if (it != t.cv.end() && it->second > o.cv_tolerance) ent.push_back(t.name);
    }
    if (!ent.empty()) {
      F.push_back({"entropy_unstable", "info", "data",
                   fmt::format("entropy calibration would be unstable on: {}", Names(ent))});
    }
  }
  for (const TensorDiagnosis& t : r.tensors) TensorFindings(t, o.method, &F);

  if (!r.batch.graph_reasons.empty()) {
    F.push_back({"batch_dependent_graph", "warning", "model",
                 fmt::format("activations depend on the batch composition: {}; export the model in "
                             "eval mode",
                             Names(r.batch.graph_reasons, 3))});
  }
  if (r.batch.measured &&
      (r.batch.max_rel_amax_diff > kBatchTolerance || r.batch.max_output_diff > kBatchTolerance)) {
    F.push_back(
        {"batch_dependent", "error", "model",
         fmt::format("statistics differ between batch 1 and batch {} on the same {} samples: "
                     "amax of '{}' by {:.3g}%, outputs by {:.3g}% of their range",
                     r.batch.batch, r.batch.samples, r.batch.worst_tensor,
                     100.0 * r.batch.max_rel_amax_diff, 100.0 * r.batch.max_output_diff)});
  }

  // Inputs: each set alone, calibration vs reference vs expectation, outlier samples.
  for (const InputStats& s : r.inputs) {
    CheckInputSet(s, "calibration", &F);
    if (!o.expect.empty()) CheckExpectation(s, "calibration", o.expect, &F);
  }
  for (const InputStats& s : r.reference_inputs) {
    CheckInputSet(s, "reference", &F);
    if (!o.expect.empty()) CheckExpectation(s, "reference", o.expect, &F);
    for (const InputStats& c : r.inputs) {
      if (c.input == s.input) CompareInputSets(c, "calibration", s, "reference", &F);
    }
  }
  SampleOutliers(r.inputs, nullptr, &r.outliers);
  if (!r.outliers.empty()) {
    std::string idx;
    for (size_t i = 0; i < r.outliers.size() && i < 10; ++i)
      idx += fmt::format("{}{}", i ? ", " : "", r.outliers[i].index);
    F.push_back(
        {"outlier_samples", "warning", "data",
         fmt::format("{} calibration samples have input statistics far from the rest (robust "
                     "z > {}): {}{}",
                     r.outliers.size(), kSampleOutlierZ, idx,
                     r.outliers.size() > 10 ? ", ..." : "")});
  }
  if (!r.reference_inputs.empty() && r.reference_inputs.size() == r.inputs.size()) {
    SampleOutliers(r.reference_inputs, &r.inputs, &r.reference_outliers);
    if (!r.reference_outliers.empty()) {
      const double share = static_cast<double>(r.reference_outliers.size()) /
                           static_cast<double>(std::max<int64_t>(r.reference_samples, 1));
      std::string idx;
      for (size_t i = 0; i < r.reference_outliers.size() && i < 10; ++i) {
        idx += fmt::format("{}{}", i ? ", " : "", r.reference_outliers[i].index);
      }
      F.push_back({"reference_outlier_samples", share > 0.01 ? "warning" : "info", "data",
                   fmt::format("{} reference samples lie outside the calibration set's input "
                               "statistics (robust z > {}): {}{}",
                               r.reference_outliers.size(), kSampleOutlierZ, idx,
                               r.reference_outliers.size() > 10 ? ", ..." : "")});
    }
  }
  if (!o.reference_data.empty()) {
    std::vector<const TensorDiagnosis*> clip, shift;
    const double clip_limit = std::max(kReferenceClipShare, 2.0 / static_cast<double>(n + 1));
    for (const TensorDiagnosis& t : r.tensors) {
      if (t.ref_clip_share - t.clip_share > clip_limit) clip.push_back(&t);
      if (t.ref_js_bits > kShiftJsBits) shift.push_back(&t);
    }
    std::sort(clip.begin(), clip.end(),
              [](auto* a, auto* b) { return a->ref_clip_share > b->ref_clip_share; });
    std::sort(shift.begin(), shift.end(),
              [](auto* a, auto* b) { return a->ref_js_bits > b->ref_js_bits; });
    if (!clip.empty()) {
      std::vector<std::string> s;
      for (auto* t : clip)
        s.push_back(
            fmt::format("{} ({:.2f}% beyond {:.4g})", t->name, 100 * t->ref_clip_share, t->amax));
      F.push_back(
          {"reference_clipping", "warning", clip.front()->name,
           fmt::format("the reference data would be clipped by the calibrated scales (beyond what "
                       "calibration itself clips, > {:.2f}%): {}",
                       100.0 * clip_limit, Names(s))});
    }
    if (!shift.empty()) {
      std::vector<std::string> s;
      for (auto* t : shift)
        s.push_back(fmt::format("{} (JS {:.3f} bits)", t->name, t->ref_js_bits));
      F.push_back({"distribution_shift", "warning", shift.front()->name,
                   fmt::format("activation distributions differ between calibration and reference "
                               "data: {}",
                               Names(s))});
    }
  }
  r.clean = std::none_of(F.begin(), F.end(), [](const Finding& f) { return f.severity != "info"; });
}

}  // namespace quantkit::pipelines::diagnose_internal
