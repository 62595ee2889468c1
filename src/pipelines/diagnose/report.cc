// Reports of `diagnose`: the text summary, the JSON document and the SVG pictures (plain text
// written with fmt: amax convergence curves, |x| histograms with each method's threshold).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/text.h"
#include "pipelines/diagnose/diagnose.h"

namespace quantkit::pipelines {
namespace {

using nlohmann::json;

// JSON has no Inf/NaN: write null for them.
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json InputJson(const InputStats& s) {
  return {{"input", s.input},
          {"samples", s.samples},
          {"sample_dims", s.sample_dims},
          {"channel_axis", s.channel_axis},
          {"scale", s.scale},
          {"mean", Num(s.mean)},
          {"std", Num(s.std)},
          {"min", Num(s.min)},
          {"max", Num(s.max)},
          {"channel_mean", s.channel_mean},
          {"channel_std", s.channel_std},
          {"adjacent_correlation", Num(s.lag1_corr)},
          {"excess_kurtosis", Num(s.kurtosis)},
          {"constant_samples", s.constant_samples},
          {"duplicate_samples", s.duplicate_samples}};
}

std::string FileSafe(const std::string& s) {
  std::string o;
  for (char c : s)
    o += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return o.substr(0, 80);
}

constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// amax(n) / amax(N) of every tensor against the samples used: flat lines have converged.
std::string ConvergenceSvg(const DiagnoseResult& r) {
  const double W = 640, H = 400, L = 60, R = 190, T = 30, B = 50;
  const double pw = W - L - R, ph = H - T - B;
  double lo = 1.0, hi = 1.0;
  for (const TensorDiagnosis& t : r.tensors) {
    if (t.amax <= 0) continue;
    for (const auto& [n, a] : t.convergence)
      lo = std::min(lo, a / double(t.amax)), hi = std::max(hi, a / double(t.amax));
  }
  lo = std::max(0.0, lo - 0.02), hi += 0.02;
  const double xmax = static_cast<double>(std::max<int64_t>(r.samples, 1));
  auto X = [&](double n) { return L + pw * n / xmax; };
  auto Y = [&](double v) { return T + ph * (hi - v) / (hi - lo); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"18\" font-size=\"13\">{} amax vs samples (relative to all {} samples)</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
      W, H, L, XmlEscape(r.method), r.samples, L, T, pw, ph);
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4.0;
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3f}</text>\n", L - 4,
                     Y(v) + 4, v);
    const double n = xmax * i / 4.0;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", X(n),
                     T + ph + 16, n);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">samples</text>\n", L + pw / 2,
                   H - 10);
  s += fmt::format(
      "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" stroke-dasharray=\"4\"/>\n",
      L, L + pw, Y(1.0), Y(1.0));
  int idx = 0;
  for (const TensorDiagnosis& t : r.tensors) {
    if (t.amax <= 0) continue;
    const char* color = kColors[idx % 10];
    std::string pts;
    for (const auto& [n, a] : t.convergence)
      pts += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(n)), Y(a / double(t.amax)));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     color, pts);
    if (idx < 20) {
      s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{} (+-{:.1f}%)</text>\n", L + pw + 8,
                       T + 12 + 14 * idx, color, XmlEscape(t.name.substr(0, 24)),
                       100.0 * (std::isfinite(t.ci_rel) ? t.ci_rel : 0.0));
    }
    ++idx;
  }
  return s + "</svg>\n";
}

// |x| histogram (log counts) with the threshold of each method.
std::string HistogramSvg(const TensorDiagnosis& t) {
  const double W = 640, H = 320, L = 50, R = 20, T = 30, B = 40;
  const double pw = W - L - R, ph = H - T - B;
  const size_t bins = t.abs_hist.size();
  double top = 1.0;
  for (int64_t c : t.abs_hist) top = std::max(top, std::log10(1.0 + static_cast<double>(c)));
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"18\" font-size=\"13\">{}: |x| histogram (log count), recommended {}</text>\n",
      W, H, L, XmlEscape(t.name), XmlEscape(t.recommended_method));
  const double bw = pw / static_cast<double>(std::max<size_t>(bins, 1));
  for (size_t i = 0; i < bins; ++i) {
    const double h = ph * std::log10(1.0 + static_cast<double>(t.abs_hist[i])) / top;
    if (h <= 0) continue;
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#9ecae1\"/>\n",
        L + bw * static_cast<double>(i), T + ph - h, bw, h);
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#444\"/>\n", L, L + pw,
                   T + ph, T + ph);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.4g}</text>\n",
      L, T + ph + 14, L + pw, T + ph + 14, t.range.amax);
  int i = 0;
  for (const auto& [method, amax] : t.method_amax) {
    if (t.range.amax <= 0) break;
    const std::string label = quant::MethodLabel(method);
    const double x = L + pw * std::min(1.0, amax / double(t.range.amax));
    const char* color = kColors[(i + 3) % 10];
    s += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
        x, x, T, T + ph, color);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{}\" fill=\"{}\" text-anchor=\"end\">{} {:.4g}</text>\n", x - 3,
        T + 12 + 13 * i, color, XmlEscape(label), amax);
    ++i;
  }
  return s + "</svg>\n";
}

}  // namespace

std::string DiagnoseJson(const DiagnoseResult& r) {
  json j;
  j["model"] = r.model;
  j["data"] = r.data;
  j["method"] = r.method;
  j["samples"] = r.samples;
  j["chunk_size"] = r.chunk_size;
  j["clean"] = r.clean;
  j["sufficiency"] = {{"enough", r.enough},
                      {"worst_ci_rel", Num(r.worst_ci_rel)},
                      {"suggested_samples", r.suggested_samples},
                      {"moving", r.moving}};
  j["unstable"] = r.unstable;
  json findings = json::array();
  for (const Finding& f : r.findings) {
    findings.push_back({{"code", f.code},
                        {"severity", f.severity},
                        {"subject", f.subject},
                        {"message", f.message}});
  }
  j["findings"] = findings;
  json tensors = json::array();
  for (const TensorDiagnosis& t : r.tensors) {
    json conv = json::array();
    for (const auto& [n, a] : t.convergence) conv.push_back({n, a});
    json methods = json::object(), cv = json::object();
    for (const auto& [k, v] : t.method_amax) methods[quant::MethodLabel(k)] = v;
    for (const auto& [k, v] : t.cv) cv[quant::MethodLabel(k)] = Num(v);
    tensors.push_back({{"name", t.name},
                       {"amax", t.amax},
                       {"min", Num(t.range.min)},
                       {"max", Num(t.range.max)},
                       {"count", t.range.count},
                       {"zero_count", t.range.zero_count},
                       {"nan_count", t.range.nan_count},
                       {"inf_count", t.range.posinf_count + t.range.neginf_count},
                       {"method_amax", methods},
                       {"convergence", conv},
                       {"ci_low", t.ci_low},
                       {"ci_high", t.ci_high},
                       {"ci_rel", Num(t.ci_rel)},
                       {"cv", cv},
                       {"channels", t.channels},
                       {"dead_channels", t.dead_channels},
                       {"outlier_ratio", Num(t.outlier_ratio)},
                       {"entropy_clip_share", Num(t.entropy_clip_share)},
                       {"clip_share", Num(t.clip_share)},
                       {"reference_clip_share", Num(t.ref_clip_share)},
                       {"reference_js_bits", Num(t.ref_js_bits)},
                       {"recommended_method", t.recommended_method},
                       {"recommendation", t.recommendation}});
  }
  j["tensors"] = tensors;
  j["inputs"] = json::array();
  for (const InputStats& s : r.inputs) j["inputs"].push_back(InputJson(s));
  if (!r.reference.empty()) {
    j["reference"] = {
        {"data", r.reference}, {"samples", r.reference_samples}, {"inputs", json::array()}};
    for (const InputStats& s : r.reference_inputs) j["reference"]["inputs"].push_back(InputJson(s));
  }
  json outl = json::array(), routl = json::array();
  for (const SampleOutlier& o : r.outliers)
    outl.push_back({{"index", o.index},
                    {"input", o.input},
                    {"z_mean", Num(o.z_mean)},
                    {"z_std", Num(o.z_std)}});
  for (const SampleOutlier& o : r.reference_outliers)
    routl.push_back({{"index", o.index},
                     {"input", o.input},
                     {"z_mean", Num(o.z_mean)},
                     {"z_std", Num(o.z_std)}});
  j["outlier_samples"] = outl;
  j["reference_outlier_samples"] = routl;
  j["batch"] = {{"graph_reasons", r.batch.graph_reasons},
                {"measured", r.batch.measured},
                {"samples", r.batch.samples},
                {"batch", r.batch.batch},
                {"max_rel_amax_diff", Num(r.batch.max_rel_amax_diff)},
                {"worst_tensor", r.batch.worst_tensor},
                {"max_output_diff", Num(r.batch.max_output_diff)}};
  j["seconds"] = r.seconds;
  return j.dump(2) + "\n";
}

std::string DiagnoseText(const DiagnoseResult& r) {
  std::string s = fmt::format("diagnose {}\ndata: {}; {} samples used, chunks of {}; method {}\n",
                              r.model, r.data, r.samples, r.chunk_size, r.method);
  if (!r.reference.empty()) s += fmt::format("reference: {}\n", r.reference);
  for (const InputStats& in : r.inputs) {
    s += fmt::format("input '{}': {} scale, mean {:.4g} std {:.4g} range [{:.4g}, {:.4g}]\n",
                     in.input, in.scale, in.mean, in.std, in.min, in.max);
  }
  size_t width = 6;
  for (const TensorDiagnosis& t : r.tensors)
    width = std::max(width, std::min<size_t>(t.name.size(), 48));
  s += fmt::format("\n{:<{}}  {:>9}  {:>21}  {:>7}  recommended\n", "tensor", width, "amax",
                   "95% interval", "cv");
  for (const TensorDiagnosis& t : r.tensors) {
    auto cv = t.cv.find(r.chosen);
    // Long names keep their end (the distinguishing part of exporter names).
    const std::string name =
        t.name.size() <= width ? t.name : "..." + t.name.substr(t.name.size() - width + 3);
    s += fmt::format("{:<{}}  {:>9.4g}  [{:>8.4g}, {:>8.4g}]  {:>6.2f}%  {}\n", name, width, t.amax,
                     t.ci_low, t.ci_high, cv == t.cv.end() ? 0.0 : 100.0 * cv->second,
                     t.recommended_method);
  }
  s += "\n";
  for (const char* sev : {"error", "warning", "info"}) {
    for (const Finding& f : r.findings) {
      if (f.severity == sev) s += fmt::format("{}: [{}] {}\n", f.severity, f.code, f.message);
    }
  }
  s += r.clean
           ? fmt::format("verdict: clean bill — {} samples, no problems found ({:.1f} s)\n",
                         r.samples, r.seconds)
           : fmt::format("verdict: problems found, see the errors and warnings above ({:.1f} s)\n",
                         r.seconds);
  return s;
}

Result<std::vector<std::string>> WriteDiagnoseSvgs(const DiagnoseResult& r, ArtifactSet& out) {
  std::vector<std::string> written;
  QK_ASSIGN_OR_RETURN(const std::string conv, out.StageNew("convergence.svg"));
  QK_RETURN_IF_ERROR(WriteFileAtomic(conv, ConvergenceSvg(r)));
  written.push_back(out.Target("convergence.svg"));
  // Histograms for the tensors a finding names first, then the model inputs; at most 8 files.
  std::vector<const TensorDiagnosis*> pick;
  auto want = [&](const std::string& name) {
    for (const TensorDiagnosis& t : r.tensors) {
      if (t.name == name && !t.abs_hist.empty() &&
          std::find(pick.begin(), pick.end(), &t) == pick.end())
        pick.push_back(&t);
    }
  };
  for (const Finding& f : r.findings) want(f.subject);
  for (const InputStats& in : r.inputs) want(in.input);
  for (const TensorDiagnosis& t : r.tensors) want(t.name);
  if (pick.size() > 8) pick.resize(8);
  for (const TensorDiagnosis* t : pick) {
    const std::string name = "hist_" + FileSafe(t->name) + ".svg";
    QK_ASSIGN_OR_RETURN(const std::string path, out.StageNew(name));
    QK_RETURN_IF_ERROR(WriteFileAtomic(path, HistogramSvg(*t)));
    written.push_back(out.Target(name));
  }
  return written;
}

}  // namespace quantkit::pipelines
