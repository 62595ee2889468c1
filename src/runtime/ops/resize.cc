// Resize (10, 11, 13, 18, 19) and Upsample (7, 9).
//
// Resizing is separable: along each resized axis, output position o maps to an input coordinate
// x = T(o) by the coordinate_transformation_mode T, and the output is a weighted sum of input
// taps around x. The taps and weights of one axis form a dense [out, in] matrix W built on the
// host in double, and the axis is resized with one matmul (x.movedim(axis, -1) @ W^T). This one
// mechanism covers every mode:
//   nearest  one tap, chosen by nearest_mode (round_prefer_floor/ceil, floor, ceil)
//   linear   taps floor(x)+i, i in [start, 2-start), weight max(0, 1-|s*(i-r)|), r = x-floor(x)
//   cubic    same with the Keys kernel (cubic_coeff_a), start = floor(-2/s)+1
// where s = min(scale, 1) with antialias (opset 18) and 1 otherwise; out-of-range taps are
// clamped to the edge, or dropped and the weights renormalised with exclude_outside.
// tf_crop_and_resize rows whose x falls outside the input get extrapolation_value.
#include <cmath>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  std::vector<int64_t> axes;
  std::string aspect = "stretch";
  // Input positions (-1 if absent): roi, scales, sizes; or scales from an attribute.
  int roi_input = -1, scales_input = -1, sizes_input = -1;
  std::vector<float> attr_scales;
};

// `out` is the unrounded output length scale * in, as in the reference implementation (it
// matters for align_corners and tf_crop_and_resize with scales that do not divide evenly).
double Coordinate(const ResizeAttrs& a, double o, int64_t in, double out, int64_t out_int,
                  double scale, double roi_start, double roi_end) {
  const std::string& m = a.coord;
  if (m == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
  if (m == "half_pixel") return (o + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return out == 1 ? 0.0 : o * (in - 1) / (out - 1);
  if (m == "asymmetric") return o / scale;
  if (m == "half_pixel_symmetric") {
    const double adjustment = out_int / out;
    const double center = in / 2.0;
    const double offset = center * (1 - adjustment);
    return offset + (o + 0.5) / scale - 0.5;
  }
  // tf_crop_and_resize
  if (out > 1) return roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) / (out - 1);
  return 0.5 * (roi_start + roi_end) * (in - 1);
}

int64_t NearestIndex(const std::string& mode, double x, bool downsample) {
  const double f = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "simple") return static_cast<int64_t>(downsample ? std::ceil(x) : f);  // opset < 11
  if (x - f == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));
}

double Cubic(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Dense [out, in] interpolation matrix of one axis; `outside` marks rows to extrapolate.
at::Tensor AxisWeights(const ResizeAttrs& a, int64_t in, int64_t out, double scale,
                       double roi_start, double roi_end, std::vector<bool>* outside) {
  at::Tensor w = at::zeros({out, in}, at::kDouble);
  double* p = w.data_ptr<double>();
  outside->assign(out, false);
  const double s = a.antialias ? std::min(scale, 1.0) : 1.0;
  for (int64_t o = 0; o < out; ++o) {
    const double x =
        Coordinate(a, static_cast<double>(o), in, scale * in, out, scale, roi_start, roi_end);
    if (a.coord == "tf_crop_and_resize" && (x < 0 || x > in - 1)) {
      (*outside)[o] = true;
      continue;
    }
    double* row = p + o * in;
    if (a.mode == "nearest") {
      row[std::clamp<int64_t>(NearestIndex(a.nearest, x, scale < 1), 0, in - 1)] = 1;
      continue;
    }
    const bool cubic = a.mode == "cubic";
    const double f = std::floor(x), r = x - f;
    const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / s)) + 1;
    double sum = 0;
    for (int64_t i = start; i < 2 - start; ++i) {
      const double t = s * (static_cast<double>(i) - r);
      double c = cubic ? Cubic(t, a.cubic_a) : std::max(0.0, 1 - std::abs(t));
      int64_t idx = static_cast<int64_t>(f) + i;
      if (idx < 0 || idx >= in) {
        if (a.exclude_outside) continue;
        idx = std::clamp<int64_t>(idx, 0, in - 1);
      }
      row[idx] += c;
      sum += c;
    }
    if ((a.exclude_outside || a.antialias) && sum != 0) {
      for (int64_t i = 0; i < in; ++i) row[i] /= sum;
    }
  }
  return w;
}

at::Tensor RunResize(const ResizeAttrs& a, KernelContext& c) {
  const at::Tensor& x = c.in(0);
  const int64_t rank = x.dim();
  std::vector<int64_t> axes;
  for (int64_t ax : a.axes) axes.push_back(NormAxis(ax, rank));
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const size_t n = axes.size();
  std::vector<double> scales(n, 1.0);
  std::vector<int64_t> out(n);
  std::vector<double> roi;
  if (a.roi_input >= 0 && c.has(a.roi_input) && c.in(a.roi_input).numel() > 0)
    roi = ToDoubleVector(c.in(a.roi_input));
  std::vector<double> given_scales;
  if (!a.attr_scales.empty()) given_scales.assign(a.attr_scales.begin(), a.attr_scales.end());
  if (a.scales_input >= 0 && c.has(a.scales_input) && c.in(a.scales_input).numel() > 0) {
    given_scales = ToDoubleVector(c.in(a.scales_input));
  }
  if (!given_scales.empty()) {
    QK_KERNEL_CHECK(given_scales.size() == n, "scales has {} values for {} axes",
                    given_scales.size(), n);
    for (size_t i = 0; i < n; ++i) {
      scales[i] = given_scales[i];
      out[i] = static_cast<int64_t>(std::floor(x.size(axes[i]) * scales[i]));
    }
  } else {
    QK_KERNEL_CHECK(a.sizes_input >= 0 && c.has(a.sizes_input),
                    "one of scales and sizes is required");
    std::vector<int64_t> sizes = ToInt64Vector(c.in(a.sizes_input));
    QK_KERNEL_CHECK(sizes.size() == n, "sizes has {} values for {} axes", sizes.size(), n);
    if (a.aspect == "stretch") {
      for (size_t i = 0; i < n; ++i) {
        out[i] = sizes[i];
        scales[i] = static_cast<double>(sizes[i]) / x.size(axes[i]);
      }
    } else {
      double s = a.aspect == "not_larger" ? 1e300 : 0;
      for (size_t i = 0; i < n; ++i) {
        const double r = static_cast<double>(sizes[i]) / x.size(axes[i]);
        s = a.aspect == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (size_t i = 0; i < n; ++i) {
        scales[i] = s;
        out[i] = static_cast<int64_t>(std::round(s * x.size(axes[i])));
      }
    }
  }
  const bool integral = !at::isFloatingType(x.scalar_type());
  at::Tensor y = integral ? x.to(at::kDouble) : x;
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = axes[i];
    const int64_t in = x.size(d);
    if (out[i] == in && scales[i] == 1.0 && a.coord != "tf_crop_and_resize") continue;
    QK_KERNEL_CHECK(in > 0 && out[i] >= 0, "cannot resize axis {} from {} to {}", d, in, out[i]);
    double rs = 0, re = 1;
    if (!roi.empty()) {
      QK_KERNEL_CHECK(roi.size() == 2 * n || roi.size() == 2 * static_cast<size_t>(rank),
                      "roi has {} values", roi.size());
      const size_t k = roi.size() == 2 * n ? i : static_cast<size_t>(d);
      rs = roi[k];
      re = roi[k + roi.size() / 2];
    }
    std::vector<bool> outside;
    // Built on the host, used where y is (a host matrix in a device bmm fails on a GPU).
    at::Tensor w =
        AxisWeights(a, in, out[i], scales[i], rs, re, &outside).to(y.device(), y.scalar_type());
    y = at::matmul(y.movedim(d, -1), w.t()).movedim(-1, d);
    if (std::find(outside.begin(), outside.end(), true) != outside.end()) {
      std::vector<uint8_t> m(outside.begin(), outside.end());
      std::vector<int64_t> shape(rank, 1);
      shape[d] = out[i];
      at::Tensor mask = at::tensor(m, at::kByte).to(y.device(), at::kBool).reshape(shape);
      y = at::where(mask, at::scalar_tensor(a.extrapolation, y.options()), y);
    }
  }
  if (integral) y = at::round(y).to(x.scalar_type());
  return y.contiguous();
}

Result<ResizeAttrs> ReadAttrs(const KernelInit& init, bool upsample) {
  ResizeAttrs a;
  const ir::Node& n = init.node;
  a.mode = n.GetString("mode", "nearest");
  if (a.mode == "bilinear") a.mode = "linear";  // Upsample-7 spelling
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic") {
    return init.Error(StatusCode::kInvalidModel, "unknown mode '{}'", a.mode);
  }
  const bool legacy = upsample || init.opset < 11;
  if (legacy) {
    a.coord = "asymmetric";
    a.nearest = "floor";
    if (upsample && init.opset < 9) {
      a.attr_scales = n.GetFloats("scales");
    } else {
      a.scales_input = 1;
    }
    return a;
  }
  a.coord = n.GetString("coordinate_transformation_mode", "half_pixel");
  a.nearest = n.GetString("nearest_mode", "round_prefer_floor");
  a.cubic_a = n.GetFloat("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.GetInt("exclude_outside", 0) != 0;
  a.extrapolation = n.GetFloat("extrapolation_value", 0.0f);
  a.antialias = n.GetInt("antialias", 0) != 0;
  a.axes = n.GetInts("axes");
  a.aspect = n.GetString("keep_aspect_ratio_policy", "stretch");
  a.roi_input = 1;
  a.scales_input = 2;
  a.sizes_input = 3;
  static const char* kCoords[] = {
      "half_pixel",         "pytorch_half_pixel",   "align_corners",       "asymmetric",
      "tf_crop_and_resize", "half_pixel_symmetric", "tf_half_pixel_for_nn"};
  if (std::find(std::begin(kCoords), std::end(kCoords), a.coord) == std::end(kCoords)) {
    return init.Error(StatusCode::kInvalidModel, "unknown coordinate_transformation_mode '{}'",
                      a.coord);
  }
  if (a.aspect != "stretch" && a.aspect != "not_larger" && a.aspect != "not_smaller") {
    return init.Error(StatusCode::kInvalidModel, "unknown keep_aspect_ratio_policy '{}'", a.aspect);
  }
  return a;
}

Result<KernelPtr> MakeResize(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(ResizeAttrs a, ReadAttrs(init, false));
  return MakeKernel([a](KernelContext& c) { return Out{RunResize(a, c)}; });
}

Result<KernelPtr> MakeUpsample(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(ResizeAttrs a, ReadAttrs(init, true));
  return MakeKernel([a](KernelContext& c) { return Out{RunResize(a, c)}; });
}

}  // namespace

void AppendResizeKernels(KernelTable& t) {
  t.push_back({"", "Resize", 10, kLatestOpset, MakeResize});
  t.push_back({"", "Upsample", 7, 9, MakeUpsample});
}

}  // namespace quantkit::runtime
