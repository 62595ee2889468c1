// Losses, integer/quantized linear algebra and small utility ops: NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, NonMaxSuppression,
// GridSample, AffineGrid, CenterCropPad, EyeLike,
// Shrink, Det, Compress, ReverseSequence, LRN, Hann/Hamming/BlackmanWindow.
#include <ATen/core/Reduction.h>

#include <array>
#include <cmath>
#include <limits>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

Result<int64_t> ReadReduction(const KernelInit& init) {
  const std::string r = init.node.GetString("reduction", "mean");
  if (r == "none") return static_cast<int64_t>(at::Reduction::None);
  if (r == "mean") return static_cast<int64_t>(at::Reduction::Mean);
  if (r == "sum") return static_cast<int64_t>(at::Reduction::Sum);
  return init.Error(StatusCode::kInvalidModel, "unknown reduction '{}'", r);
}

// No ignore_index attribute: no target value is ignored.
int64_t ReadIgnoreIndex(const KernelInit& init) {
  return init.node.GetInt("ignore_index", std::numeric_limits<int64_t>::min());
}

// ONNX defined both losses after PyTorch's, so ATen's nll_loss_nd matches them (weighted mean
// divides by the sum of the weights of the non-ignored targets).
Result<KernelPtr> MakeNll(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(int64_t reduction, ReadReduction(init));
  const int64_t ignore = ReadIgnoreIndex(init);
  return MakeKernel([=](KernelContext& c) {
    at::Tensor w = c.has(2) ? c.in(2) : at::Tensor();
    return Out{at::nll_loss_nd(c.in(0), c.in(1).to(at::kLong), w, reduction, ignore)};
  });
}

Result<KernelPtr> MakeSce(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(int64_t reduction, ReadReduction(init));
  const int64_t ignore = ReadIgnoreIndex(init);
  return MakeKernel([=](KernelContext& c) {
    at::Tensor log_prob = at::log_softmax(c.in(0), 1);
    at::Tensor w = c.has(2) ? c.in(2) : at::Tensor();
    Out out{at::nll_loss_nd(log_prob, c.in(1).to(at::kLong), w, reduction, ignore)};
    if (c.num_outputs() > 1) out.push_back(log_prob);
    return out;
  });
}

// y = saturate(round(x / scale) + zp) with scale = (max(0, max x) - min(0, min x)) / 255.
Result<KernelPtr> MakeDynamicQuantize(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const double lo = std::min(0.0, x.numel() ? x.min().item<double>() : 0.0);
    const double hi = std::max(0.0, x.numel() ? x.max().item<double>() : 0.0);
    const float scale = static_cast<float>((hi - lo) / 255.0);
    const float safe = scale == 0 ? 1.0f : scale;
    const float zp = std::clamp(std::nearbyint(static_cast<float>(-lo) / safe), 0.0f, 255.0f);
    // Divided by a tensor on x's device, not a C++ float: CUDA turns division by a host scalar into
    // a product with its reciprocal, which rounds differently (1 of 6 values of the ONNX node case
    // on an H200).
    const at::Tensor divisor = at::scalar_tensor(safe, x.options().dtype(at::kFloat));
    at::Tensor y = at::clamp(at::round(x.to(at::kFloat) / divisor) + zp, 0, 255).to(at::kByte);
    return Out{y, at::scalar_tensor(scale, x.options().dtype(at::kFloat)),
               at::scalar_tensor(zp, x.options().dtype(at::kFloat)).to(at::kByte)};
  });
}

// Integer products run in double on the centered operands (exact below 2^53; ATen's integer
// matmul is not available in every CPU build). A's zero point is per row, B's per column.
Result<KernelPtr> MakeMatMulInteger(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    at::Tensor a = CenterZeroPoint(c.in(0), c.has(2) ? c.in(2) : at::Tensor(), -2);
    at::Tensor b = CenterZeroPoint(c.in(1), c.has(3) ? c.in(3) : at::Tensor(), -1);
    return Out{at::matmul(a, b).round().to(at::kInt)};
  });
}

Result<KernelPtr> MakeQLinearMatMul(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    at::Tensor a = CenterZeroPoint(c.in(0), c.in(2), -2) * c.in(1).to(at::kDouble);
    at::Tensor b = CenterZeroPoint(c.in(3), c.in(5), -1) * c.in(4).to(at::kDouble);
    return Out{Requantize(at::matmul(a, b), c.in(6), c.in(7))};
  });
}

Result<KernelPtr> MakeEyeLike(const KernelInit& init) {
  const int64_t k = init.node.GetInt("k", 0);
  const int64_t dtype = init.node.GetInt("dtype", 0);
  at::ScalarType st = at::kFloat;
  const bool has_dtype = dtype != 0;
  if (has_dtype && !OnnxToScalarType(dtype, &st)) {
    return init.Error(StatusCode::kUnsupported, "dtype {} is not supported", dtype);
  }
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    QK_KERNEL_CHECK(x.dim() == 2, "input must be 2-D, got rank {}", x.dim());
    at::Tensor e = at::ones({x.size(0), x.size(1)}, x.options().dtype(at::kDouble)).triu(k).tril(k);
    return Out{e.to(has_dtype ? st : x.scalar_type())};
  });
}

Result<KernelPtr> MakeShrink(const KernelInit& init) {
  const double bias = init.node.GetFloat("bias", 0.0f);
  const double lambd = init.node.GetFloat("lambd", 0.5f);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor xd = x.to(at::kDouble);
    at::Tensor y =
        at::where(xd < -lambd, xd + bias, at::where(xd > lambd, xd - bias, at::zeros_like(xd)));
    return Out{y.to(x.scalar_type())};
  });
}

Result<KernelPtr> MakeDet(const KernelInit&) {
  return MakeKernel([](KernelContext& c) { return Out{at::linalg_det(c.in(0))}; });
}

Result<KernelPtr> MakeCompress(const KernelInit& init) {
  const bool has_axis = init.node.has_attr("axis");
  const int64_t axis = init.node.GetInt("axis", 0);
  return MakeKernel([=](KernelContext& c) {
    at::Tensor x = has_axis ? c.in(0) : c.in(0).reshape({-1});
    const int64_t a = has_axis ? NormAxis(axis, x.dim()) : 0;
    at::Tensor cond = c.in(1).to(at::kBool).reshape({-1});
    QK_KERNEL_CHECK(cond.numel() <= x.size(a), "condition has {} values for axis size {}",
                    cond.numel(), x.size(a));
    return Out{x.index_select(a, at::nonzero(cond).reshape({-1}).to(x.device()))};
  });
}

Result<KernelPtr> MakeReverseSequence(const KernelInit& init) {
  const int64_t batch_axis = init.node.GetInt("batch_axis", 1);
  const int64_t time_axis = init.node.GetInt("time_axis", 0);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t bt = NormAxis(batch_axis, x.dim()), tt = NormAxis(time_axis, x.dim());
    const int64_t steps = x.size(tt);
    at::Tensor lens = c.in(1).to(x.device(), at::kLong).reshape({1, -1});  // [1, B]
    at::Tensor t = at::arange(steps, lens.options()).reshape({-1, 1});     // [T, 1]
    at::Tensor src = at::where(t < lens, lens - 1 - t, t);                 // [T, B]
    std::vector<int64_t> shape(x.dim(), 1);
    shape[tt] = steps;
    shape[bt] = x.size(bt);
    if (tt > bt) src = src.t();
    return Out{at::gather(x, tt, src.reshape(shape).expand(x.sizes()).contiguous())};
  });
}

// LRN: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
Result<KernelPtr> MakeLrn(const KernelInit& init) {
  const int64_t size = init.node.GetInt("size", 0);
  const double alpha = init.node.GetFloat("alpha", 1e-4f);
  const double beta = init.node.GetFloat("beta", 0.75f);
  const double bias = init.node.GetFloat("bias", 1.0f);
  if (size <= 0) return init.Error(StatusCode::kInvalidModel, "size must be positive");
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    std::vector<int64_t> pads(2 * (x.dim() - 2), 0);
    pads.push_back(before);
    pads.push_back(after);
    at::Tensor sq = at::constant_pad_nd(x * x, pads, 0).unfold(1, size, 1).sum(-1);
    return Out{x / at::pow(sq * (alpha / size) + bias, beta)};
  });
}

enum class Window { kHann, kHamming, kBlackman };

template <Window kind>
Result<KernelPtr> MakeWindow(const KernelInit& init) {
  const bool periodic = init.node.GetInt("periodic", 1) != 0;
  at::ScalarType st = at::kFloat;
  if (!OnnxToScalarType(init.node.GetInt("output_datatype", 1), &st)) {
    return init.Error(StatusCode::kUnsupported, "unsupported output_datatype");
  }
  return MakeKernel([=](KernelContext& c) {
    const int64_t n = ToInt64Vector(c.in(0)).at(0);
    const double denom = periodic ? n : n - 1;
    at::Tensor k = at::arange(n, at::kDouble) * (2 * M_PI / denom);
    at::Tensor w;
    switch (kind) {
      case Window::kHann:
        w = 0.5 - 0.5 * at::cos(k);
        break;
      case Window::kHamming:
        w = 25.0 / 46 - 21.0 / 46 * at::cos(k);
        break;
      case Window::kBlackman:
        w = 0.42 - 0.5 * at::cos(k) + 0.08 * at::cos(2 * k);
        break;
    }
    return Out{w.to(st)};
  });
}

// GridSample (16, 20): ONNX took PyTorch's definition, so ATen's grid_sampler matches it.
Result<KernelPtr> MakeGridSample(const KernelInit& init) {
  std::string mode = init.node.GetString("mode", init.opset >= 20 ? "linear" : "bilinear");
  const std::string padding = init.node.GetString("padding_mode", "zeros");
  const bool align = init.node.GetInt("align_corners", 0) != 0;
  int64_t m = -1, p = -1;
  if (mode == "bilinear" || mode == "linear") m = 0;
  if (mode == "nearest") m = 1;
  if (mode == "bicubic" || mode == "cubic") m = 2;
  if (padding == "zeros") p = 0;
  if (padding == "border") p = 1;
  if (padding == "reflection") p = 2;
  if (m < 0 || p < 0)
    return init.Error(StatusCode::kInvalidModel, "unknown mode '{}' or padding_mode '{}'", mode,
                      padding);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    return Out{at::grid_sampler(x, c.in(1).to(x.scalar_type()), m, p, align)};
  });
}

// NonMaxSuppression (10, 11): per (batch, class), greedy selection in descending score order
// (ties: lower box index first) of boxes with score > score_threshold whose IoU with every
// box already selected is <= iou_threshold, at most max_output_boxes_per_class of them.
// Output [selected, 3] = (batch, class, box). ATen has no NMS, and the selection is sequential,
// so it runs on the host over a float copy of boxes and scores.
Result<KernelPtr> MakeNonMaxSuppression(const KernelInit& init) {
  const bool center = init.node.GetInt("center_point_box", 0) != 0;
  return MakeKernel([center](KernelContext& c) {
    // Host copies: the selection below reads them through raw pointers.
    at::Tensor boxes = c.in(0).to(at::kCPU, at::kFloat).contiguous();
    at::Tensor scores = c.in(1).to(at::kCPU, at::kFloat).contiguous();
    QK_KERNEL_CHECK(boxes.dim() == 3 && boxes.size(2) == 4 && scores.dim() == 3,
                    "boxes must be [B, N, 4] and scores [B, C, N]");
    const int64_t max_out = c.has(2) && c.in(2).numel() ? ToInt64Vector(c.in(2)).at(0) : 0;
    const double iou_max = c.has(3) && c.in(3).numel() ? ToDoubleVector(c.in(3)).at(0) : 0.0;
    const bool has_score_min = c.has(4) && c.in(4).numel();
    const double score_min = has_score_min ? ToDoubleVector(c.in(4)).at(0) : 0.0;
    const int64_t nb = boxes.size(0), n = boxes.size(1), nc = scores.size(1);
    QK_KERNEL_CHECK(scores.size(0) == nb && scores.size(2) == n,
                    "scores shape does not match boxes");
    // Corners (y0, x0, y1, x1) with y0 <= y1, x0 <= x1.
    auto corners = [&](const float* b) {
      std::array<float, 4> r;
      if (center) {
        r = {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
      } else {
        r = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]),
             std::max(b[1], b[3])};
      }
      return r;
    };
    auto iou = [](const std::array<float, 4>& a, const std::array<float, 4>& b) {
      const float ih = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
      const float iw = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
      const float inter = ih * iw;
      const float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
      return uni > 0 ? inter / uni : 0.0f;
    };
    std::vector<int64_t> out;
    const float* bp = boxes.data_ptr<float>();
    const float* sp = scores.data_ptr<float>();
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t k = 0; k < nc && max_out > 0; ++k) {
        const float* s = sp + (b * nc + k) * n;
        std::vector<int64_t> order;
        for (int64_t i = 0; i < n; ++i) {
          if (!has_score_min || s[i] > score_min) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(),
                         [s](int64_t x, int64_t y) { return s[x] > s[y]; });
        std::vector<std::array<float, 4>> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const std::array<float, 4> box = corners(bp + (b * n + i) * 4);
          bool keep = true;
          for (const auto& other : kept) keep = keep && iou(box, other) <= iou_max;
          if (!keep) continue;
          kept.push_back(box);
          out.insert(out.end(), {b, k, i});
        }
      }
    }
    const int64_t rows = static_cast<int64_t>(out.size() / 3);
    return Out{at::tensor(out, at::kLong).reshape({rows, 3}).to(c.in(0).device())};
  });
}

// AffineGrid (20): ONNX took PyTorch's affine_grid, so ATen's generator matches it.
Result<KernelPtr> MakeAffineGrid(const KernelInit& init) {
  const bool align = init.node.GetInt("align_corners", 0) != 0;
  return MakeKernel([align](KernelContext& c) {
    return Out{at::affine_grid_generator(c.in(0), ToInt64Vector(c.in(1)), align)};
  });
}

// CenterCropPad (18): per axis, crop (centered, extra element dropped at the end) or zero-pad
// (centered, extra element added at the end) to the requested size.
Result<KernelPtr> MakeCenterCropPad(const KernelInit& init) {
  const std::vector<int64_t> axes_attr = init.node.GetInts("axes");
  return MakeKernel([axes_attr](KernelContext& c) {
    at::Tensor x = c.in(0);
    const std::vector<int64_t> shape = ToInt64Vector(c.in(1));
    std::vector<int64_t> axes = axes_attr;
    if (axes.empty()) {
      for (int64_t i = 0; i < x.dim(); ++i) axes.push_back(i);
    }
    QK_KERNEL_CHECK(axes.size() == shape.size(), "shape has {} values for {} axes", shape.size(),
                    axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = NormAxis(axes[i], x.dim());
      const int64_t dim = x.size(a), want = shape[i];
      if (want < dim) {
        x = x.narrow(a, (dim - want) / 2, want);
      } else if (want > dim) {
        std::vector<int64_t> pads(2 * (x.dim() - 1 - a), 0);
        const int64_t before = (want - dim) / 2;
        pads.push_back(before);
        pads.push_back(want - dim - before);
        x = at::constant_pad_nd(x, pads, 0);
      }
    }
    return Out{x};
  });
}

}  // namespace

void AppendMiscKernels(KernelTable& t) {
  t.push_back({"", "NegativeLogLikelihoodLoss", 12, kLatestOpset, MakeNll});
  t.push_back({"", "SoftmaxCrossEntropyLoss", 12, kLatestOpset, MakeSce});
  t.push_back({"", "DynamicQuantizeLinear", 11, kLatestOpset, MakeDynamicQuantize});
  t.push_back({"", "MatMulInteger", 10, kLatestOpset, MakeMatMulInteger});
  t.push_back({"", "QLinearMatMul", 10, kLatestOpset, MakeQLinearMatMul});
  t.push_back({"", "GridSample", 16, kLatestOpset, MakeGridSample});
  t.push_back({"", "NonMaxSuppression", 10, kLatestOpset, MakeNonMaxSuppression});
  t.push_back({"", "AffineGrid", 20, kLatestOpset, MakeAffineGrid});
  t.push_back({"", "CenterCropPad", 18, kLatestOpset, MakeCenterCropPad});
  t.push_back({"", "EyeLike", 9, kLatestOpset, MakeEyeLike});
  t.push_back({"", "Shrink", 9, kLatestOpset, MakeShrink});
  t.push_back({"", "Det", 11, kLatestOpset, MakeDet});
  t.push_back({"", "Compress", 9, kLatestOpset, MakeCompress});
  t.push_back({"", "ReverseSequence", 10, kLatestOpset, MakeReverseSequence});
  t.push_back({"", "LRN", 1, kLatestOpset, MakeLrn});
  t.push_back({"", "HannWindow", 17, kLatestOpset, MakeWindow<Window::kHann>});
  t.push_back({"", "HammingWindow", 17, kLatestOpset, MakeWindow<Window::kHamming>});
  t.push_back({"", "BlackmanWindow", 17, kLatestOpset, MakeWindow<Window::kBlackman>});
}

}  // namespace quantkit::runtime
