#include "pipelines/qat/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/text.h"

namespace quantkit::pipelines {

std::string TrainingSvg(const TrainingCurve& c) {
  const double W = 640, H = 360, L = 60, R = 60, T = 30, B = 45;
  const double pw = W - L - R, ph = H - T - B;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int64_t last_step = 1;
  for (const auto& [step, v] : c.loss) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    last_step = std::max(last_step, step);
  }
  for (const auto& [step, v] : c.val) last_step = std::max(last_step, step);
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12) hi = lo + 1;
  const double steps = static_cast<double>(last_step);
  auto X = [&](double step) { return L + pw * step / steps; };
  auto Y = [&](double v) { return T + ph * (hi - v) / (hi - lo); };
  // The metric on the right axis: 0..1 for a share, else its own finite range.
  double vlo = 0, vhi = 1;
  if (!c.val_is_share) {
    vlo = std::numeric_limits<double>::infinity(), vhi = -vlo;
    for (const auto& [step, v] : c.val) {
      if (std::isfinite(v)) vlo = std::min(vlo, v), vhi = std::max(vhi, v);
    }
    if (!(vlo <= vhi)) vlo = 0, vhi = 1;
    if (vhi - vlo < 1e-300) vhi = vlo + (vlo > 0 ? vlo : 1);
  }
  auto YV = [&](double v) { return T + ph * (vhi - v) / (vhi - vlo); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
      W, H, L, XmlEscape(c.title), L, T, pw, ph);
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4.0;
    s += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f77b4\">{:.3g}</text>\n", L - 4,
        Y(v) + 4, v);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n",
                     X(steps * i / 4.0), T + ph + 16, steps * i / 4.0);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", L + pw / 2,
                   H - 10);
  s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">loss</text>\n", 4, T - 6);
  std::string pts;
  for (const auto& [step, v] : c.loss) {
    if (std::isfinite(v)) pts += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(step)), Y(v));
  }
  s += fmt::format(
      "<polyline class=\"loss\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" "
      "points=\"{}\"/>\n",
      pts);
  if (!c.val.empty()) {
    for (int i = 0; i <= 4; ++i) {
      const double v = vlo + (vhi - vlo) * i / 4.0;
      const std::string label =
          c.val_is_share ? fmt::format("{:.0f}%", 100 * v) : fmt::format("{:.3g}", v);
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">{}</text>\n", L + pw + 4,
                       YV(v) + 4, label);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#d62728\">val {}</text>\n", L + pw - 20, T - 6,
                     XmlEscape(c.metric));
    std::string vp;
    for (const auto& [step, v] : c.val) {
      if (!std::isfinite(v)) continue;
      vp += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(step)), YV(v));
      if (step == c.best_step) {
        s += fmt::format(
            "<circle class=\"best\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"none\" "
            "stroke=\"#d62728\"/>\n",
            X(static_cast<double>(step)), YV(v));
      }
    }
    s += fmt::format(
        "<polyline class=\"val\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" "
        "points=\"{}\"/>\n",
        vp);
  }
  return s + "</svg>\n";
}

}  // namespace quantkit::pipelines
