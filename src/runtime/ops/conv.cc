// Convolution and pooling: Conv, ConvInteger, QLinearConv, ConvTranspose, Col2Im, MaxPool,
// MaxUnpool, AveragePool, LpPool, Global*Pool.
//
// ONNX allows asymmetric and auto (SAME_UPPER / SAME_LOWER) padding; ATen only symmetric. When
// the resolved pads are asymmetric (or larger than ATen accepts) the input is padded explicitly
// with at::constant_pad_nd (0 for conv/average, -inf for max) and the ATen op runs unpadded.
//
// Channels-last (KernelInit::channels_last, in runs nobody observes: memory_order.h): a 2-D
// float convolution on the CPU runs on NHWC
// memory. oneDNN convolves NHWC in place, where an NCHW input costs a reorder of the input and of
// the output on every call (and ATen sends unstrided 1x1 convolutions at one thread to im2col +
// sgemm); the elementwise ops and pools between convolutions keep the memory order, so a
// network stays NHWC from its first convolution on. Constant weights are reordered once, here.
#include <cmath>
#include <limits>
#include <memory>

#include "runtime/aten_bridge.h"
#include "runtime/kernel.h"
#include "runtime/memory_order.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// Spatial geometry read once from the attributes; pads resolved per run for auto_pad.
struct Geometry {
  std::vector<int64_t> kernel;  // may be empty for Conv (taken from W)
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  static Result<Geometry> Read(const KernelInit& init) {
    Geometry g;
    g.kernel = init.node.GetInts("kernel_shape");
    g.strides = init.node.GetInts("strides");
    g.dilations = init.node.GetInts("dilations");
    g.pads = init.node.GetInts("pads");
    g.auto_pad = init.node.GetString("auto_pad", "NOTSET");
    g.ceil_mode = init.node.GetInt("ceil_mode", 0) != 0;
    if (g.auto_pad != "NOTSET" && g.auto_pad != "SAME_UPPER" && g.auto_pad != "SAME_LOWER" &&
        g.auto_pad != "VALID") {
      return init.Error(StatusCode::kInvalidModel, "unknown auto_pad '{}'", g.auto_pad);
    }
    for (int64_t s : g.strides) {
      if (s <= 0) return init.Error(StatusCode::kInvalidModel, "strides must be positive");
    }
    if (!g.kernel.empty() && !g.pads.empty() && g.pads.size() != 2 * g.kernel.size()) {
      return init.Error(StatusCode::kInvalidModel, "pads has {} values for {} spatial dims",
                        g.pads.size(), g.kernel.size());
    }
    return g;
  }

  // Fills defaults for n spatial dims and returns [begin..., end...] pads for `in` sizes.
  std::vector<int64_t> Resolve(const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                               std::vector<int64_t>* s, std::vector<int64_t>* d) const {
    const size_t n = in.size();
    *s = strides.empty() ? std::vector<int64_t>(n, 1) : strides;
    *d = dilations.empty() ? std::vector<int64_t>(n, 1) : dilations;
    QK_KERNEL_CHECK(s->size() == n && d->size() == n && k.size() == n,
                    "strides/dilations/kernel_shape do not match {} spatial dims", n);
    std::vector<int64_t> p(2 * n, 0);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (size_t i = 0; i < n; ++i) {
        const int64_t out = ((in[i] + (*s)[i] - 1) / (*s)[i]);
        const int64_t total =
            std::max<int64_t>(0, (out - 1) * (*s)[i] + ((k[i] - 1) * (*d)[i] + 1) - in[i]);
        const int64_t small = total / 2;
        p[i] = auto_pad == "SAME_UPPER" ? small : total - small;
        p[i + n] = total - p[i];
      }
    } else if (auto_pad == "NOTSET" && !pads.empty()) {
      QK_KERNEL_CHECK(pads.size() == 2 * n, "pads has {} values for {} spatial dims", pads.size(),
                      n);
      p = pads;
    }
    return p;
  }
};

std::vector<int64_t> Spatial(const at::Tensor& x) {
  QK_KERNEL_CHECK(x.dim() >= 3, "expected an input of rank >= 3 (N, C, spatial...), got rank {}",
                  x.dim());
  return x.sizes().slice(2).vec();
}

bool Symmetric(const std::vector<int64_t>& p, const std::vector<int64_t>& k) {
  const size_t n = p.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != p[i + n] || p[i] * 2 > k[i]) return false;
  }
  return true;
}

// constant_pad_nd wants (last dim begin, last dim end, previous dim begin, ...).
std::vector<int64_t> AtenPadList(const std::vector<int64_t>& p) {
  const size_t n = p.size() / 2;
  std::vector<int64_t> r;
  for (size_t i = n; i-- > 0;) {
    r.push_back(p[i]);
    r.push_back(p[i + n]);
  }
  return r;
}

// A Conv's constant weight in channels-last order, reordered once when the kernel is built.
struct ChannelsLastWeight {
  at::Tensor nhwc;
  const void* source = nullptr;  // the initializer's bytes: a parameter override is not this
};

// True for a tensor held in channels-last order (and not also NCHW-contiguous, as [N, C, 1, 1] is).
bool IsChannelsLast(const at::Tensor& x) {
  return x.dim() == 4 && !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
}

at::Tensor ConvForward(const Geometry& g, int64_t group, at::Tensor x, const at::Tensor& w_in,
                       const at::Tensor& b, const ChannelsLastWeight* channels_last = nullptr) {
  at::Tensor w = w_in;
  const std::vector<int64_t> in = Spatial(x);
  QK_KERNEL_CHECK(w.dim() == x.dim(), "W has rank {}, X has rank {}", w.dim(), x.dim());
  const std::vector<int64_t> k = g.kernel.empty() ? w.sizes().slice(2).vec() : g.kernel;
  std::vector<int64_t> s, d;
  std::vector<int64_t> p = g.Resolve(in, k, &s, &d);
  const size_t n = in.size();
  std::vector<int64_t> sym(n, 0);
  bool symmetric = true;
  for (size_t i = 0; i < n; ++i) symmetric = symmetric && p[i] == p[i + n];
  if (symmetric) {
    for (size_t i = 0; i < n; ++i) sym[i] = p[i];
  } else {
    x = at::constant_pad_nd(x, AtenPadList(p), 0);
  }
  if (channels_last != nullptr && ChannelsLastRun() && x.dim() == 4 &&
      x.scalar_type() == at::kFloat && x.device().is_cpu() && w.scalar_type() == at::kFloat &&
      w.device().is_cpu()) {
    x = x.contiguous(at::MemoryFormat::ChannelsLast);
    const bool packed = channels_last->source != nullptr && w.data_ptr() == channels_last->source &&
                        w.sizes() == channels_last->nhwc.sizes();
    w = packed ? channels_last->nhwc : w.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return at::convolution(x, w, b, s, sym, d, false, std::vector<int64_t>(n, 0), group);
}

Result<KernelPtr> MakeConv(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  const int64_t group = init.node.GetInt("group", 1);
  if (group < 1) return init.Error(StatusCode::kInvalidModel, "group must be >= 1, got {}", group);
  std::shared_ptr<ChannelsLastWeight> channels_last;
  if (init.channels_last) {
    channels_last = std::make_shared<ChannelsLastWeight>();
    const ir::Tensor* w = init.ConstInput(1);
    if (w != nullptr && w->dtype() == ir::DType::kFloat && w->dims().size() == 4 &&
        w->numel() > 0) {
      QK_ASSIGN_OR_RETURN(at::Tensor wrapped,
                          WrapTensor(*w, "initializer '" + init.InputName(1) + "'"));
      channels_last->nhwc = wrapped.contiguous(at::MemoryFormat::ChannelsLast);
      channels_last->source = w->data();
    }
  }
  return MakeKernel([g, group, channels_last](KernelContext& c) {
    return Out{ConvForward(g, group, c.in(0), c.in(1), c.has(2) ? c.in(2) : at::Tensor(),
                           channels_last.get())};
  });
}

// Integer convolutions run in double on the centered operands (exact for 8-bit products summed
// below 2^53; ATen has no integer convolution on CPU). W's zero point is per output channel.
Result<KernelPtr> MakeConvInteger(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  const int64_t group = init.node.GetInt("group", 1);
  return MakeKernel([g, group](KernelContext& c) {
    at::Tensor x = CenterZeroPoint(c.in(0), c.has(2) ? c.in(2) : at::Tensor(), 0);
    at::Tensor w = CenterZeroPoint(c.in(1), c.has(3) ? c.in(3) : at::Tensor(), 0);
    return Out{ConvForward(g, group, x, w, at::Tensor()).round().to(at::kInt)};
  });
}

// QLinearConv(x, xs, xzp, w, ws, wzp, ys, yzp, B): requantized integer convolution.
Result<KernelPtr> MakeQLinearConv(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  const int64_t group = init.node.GetInt("group", 1);
  return MakeKernel([g, group](KernelContext& c) {
    at::Tensor x = CenterZeroPoint(c.in(0), c.in(2), 0);
    at::Tensor w = CenterZeroPoint(c.in(3), c.in(5), 0);
    at::Tensor acc = ConvForward(g, group, x, w, c.has(8) ? c.in(8).to(at::kDouble) : at::Tensor());
    // The accumulator (bias included) is in units of x_scale * w_scale; w_scale may be per
    // output channel (dim 1 of the result).
    at::Tensor ws = c.in(4).to(at::kDouble);
    std::vector<int64_t> shape(acc.dim(), 1);
    shape[1] = -1;
    ws = ws.numel() > 1 ? ws.reshape(shape) : ws.reshape({});
    return Out{Requantize(acc * c.in(1).to(at::kDouble).reshape({}) * ws, c.in(6), c.in(7))};
  });
}

// ConvTranspose: the full (unpadded) transposed convolution, then output_padding appended and
// pads cropped in one constant_pad_nd (negative pads crop), then the bias.
Result<KernelPtr> MakeConvTranspose(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  const int64_t group = init.node.GetInt("group", 1);
  const std::vector<int64_t> output_padding = init.node.GetInts("output_padding");
  const std::vector<int64_t> output_shape = init.node.GetInts("output_shape");
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& w = c.in(1);
    const std::vector<int64_t> in = Spatial(x);
    const size_t n = in.size();
    const std::vector<int64_t> k = g.kernel.empty() ? w.sizes().slice(2).vec() : g.kernel;
    std::vector<int64_t> s = g.strides.empty() ? std::vector<int64_t>(n, 1) : g.strides;
    std::vector<int64_t> d = g.dilations.empty() ? std::vector<int64_t>(n, 1) : g.dilations;
    std::vector<int64_t> op = output_padding.empty() ? std::vector<int64_t>(n, 0) : output_padding;
    QK_KERNEL_CHECK(s.size() == n && d.size() == n && op.size() == n && k.size() == n,
                    "attributes do not match {} spatial dims", n);
    std::vector<int64_t> p(2 * n, 0);
    std::vector<int64_t> target = output_shape;
    if (target.size() > n) target.erase(target.begin(), target.end() - n);  // [N, C, ...] form
    if (target.empty() && (g.auto_pad == "SAME_UPPER" || g.auto_pad == "SAME_LOWER")) {
      for (size_t i = 0; i < n; ++i) target.push_back(in[i] * s[i]);
    }
    if (!target.empty()) {
      for (size_t i = 0; i < n; ++i) {
        const int64_t total = s[i] * (in[i] - 1) + op[i] + ((k[i] - 1) * d[i] + 1) - target[i];
        // Python's floor division, as the reference: a negative total (output_shape larger
        // than the full result) pads at the end.
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        p[i] = g.auto_pad == "SAME_UPPER" ? half : total - half;
        p[i + n] = total - p[i];
      }
    } else if (!g.pads.empty() && g.auto_pad == "NOTSET") {
      p = g.pads;
    }
    at::Tensor y = at::convolution(x, w, {}, s, std::vector<int64_t>(n, 0), d, true,
                                   std::vector<int64_t>(n, 0), group);
    std::vector<int64_t> crop(2 * n);
    for (size_t i = 0; i < n; ++i) {
      crop[i] = -p[i];
      crop[i + n] = op[i] - p[i + n];
    }
    y = at::constant_pad_nd(y, AtenPadList(crop), 0);
    if (c.has(2)) {
      std::vector<int64_t> shape(y.dim(), 1);
      shape[1] = -1;
      y = y + c.in(2).reshape(shape);
    }
    return Out{y};
  });
}

// Converts ATen pooling indices (flat within the padded spatial plane) to ONNX's (flat over the
// whole unpadded tensor, row-major, or column-major spatially when storage_order == 1).
at::Tensor OnnxIndices(const at::Tensor& idx, const std::vector<int64_t>& padded,
                       const std::vector<int64_t>& in, const std::vector<int64_t>& p,
                       int64_t channels, bool column_major) {
  const size_t n = in.size();
  at::Tensor rem = idx;
  std::vector<at::Tensor> coord(n);
  for (size_t i = n; i-- > 0;) {
    coord[i] = at::remainder(rem, padded[i]) - p[i];
    rem = at::div(rem, padded[i], "floor");
  }
  at::Tensor flat = at::zeros_like(idx);
  if (column_major) {
    int64_t stride = 1;
    for (size_t i = 0; i < n; ++i) {
      flat = flat + coord[i] * stride;
      stride *= in[i];
    }
  } else {
    int64_t stride = 1;
    for (size_t i = n; i-- > 0;) {
      flat = flat + coord[i] * stride;
      stride *= in[i];
    }
  }
  int64_t plane = 1;
  for (int64_t v : in) plane *= v;
  const int64_t nbatch = idx.size(0);
  at::Tensor base =
      at::arange(nbatch * channels, idx.options()).reshape({nbatch, channels}) * plane;
  std::vector<int64_t> shape = {nbatch, channels};
  shape.resize(idx.dim(), 1);
  return flat + base.reshape(shape);
}

// oneDNN's 2-D max pooling is ~5x faster than ATen's NCHW kernel (which also computes the
// indices) even with the two layout reorders; same values (a max is exact). It drops NaN where
// ATen propagates it, so inputs holding NaN take ATen's path. Inference only: mkldnn tensors have
// no autograd.
bool UseMkldnnMaxPool2d(const at::Tensor& x, const std::vector<int64_t>& dilations) {
  if (!at::hasMKLDNN() || x.dim() != 4 || x.scalar_type() != at::kFloat || !x.device().is_cpu() ||
      x.requires_grad() || x.numel() == 0) {
    return false;
  }
  for (int64_t d : dilations) {
    if (d != 1) return false;
  }
  return !at::isnan(x).any().item<bool>();
}

Result<KernelPtr> MakeMaxPool(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  if (g.kernel.empty())
    return init.Error(StatusCode::kInvalidModel, "missing attribute kernel_shape");
  const bool column_major = init.node.GetInt("storage_order", 0) != 0;
  return MakeKernel([g, column_major](KernelContext& c) {
    at::Tensor x = c.in(0);
    const at::ScalarType dtype = x.scalar_type();
    if (!at::isFloatingType(dtype)) x = x.to(at::kFloat);  // int8/uint8: exact in float
    const std::vector<int64_t> in = Spatial(x);
    const size_t n = in.size();
    std::vector<int64_t> s, d;
    std::vector<int64_t> p = g.Resolve(in, g.kernel, &s, &d);
    std::vector<int64_t> ap(n, 0);
    if (Symmetric(p, g.kernel)) {
      for (size_t i = 0; i < n; ++i) ap[i] = p[i];
    } else {
      x = at::constant_pad_nd(x, AtenPadList(p), -std::numeric_limits<double>::infinity());
    }
    // A channels-last input has ATen's NHWC kernel, vectorised over channels (faster than
    // oneDNN's with its reorders); it propagates NaN as the NCHW kernel does.
    if (c.num_outputs() == 1 && !IsChannelsLast(x) && UseMkldnnMaxPool2d(x, d)) {
      return Out{at::mkldnn_max_pool2d(x.to_mkldnn(), g.kernel, s, ap, d, g.ceil_mode)
                     .to_dense()
                     .to(dtype)};
    }
    std::tuple<at::Tensor, at::Tensor> r;
    if (n == 1) {
      r = at::max_pool1d_with_indices(x, g.kernel, s, ap, d, g.ceil_mode);
    } else if (n == 2) {
      r = at::max_pool2d_with_indices(x, g.kernel, s, ap, d, g.ceil_mode);
    } else if (n == 3) {
      r = at::max_pool3d_with_indices(x, g.kernel, s, ap, d, g.ceil_mode);
    } else {
      throw KernelError(fmt::format("MaxPool over {} spatial dims is not supported", n));
    }
    Out out{std::get<0>(r).to(dtype)};
    if (c.num_outputs() > 1) {
      // ATen's indices already account for its own (symmetric) padding; explicit pads shift them.
      std::vector<int64_t> shift(n, 0);
      for (size_t i = 0; i < n; ++i) shift[i] = ap[i] > 0 ? 0 : p[i];
      std::vector<int64_t> plane = x.sizes().slice(2).vec();
      out.push_back(OnnxIndices(std::get<1>(r), plane, in, shift, x.size(1), column_major));
    }
    return out;
  });
}

at::Tensor AvgPoolN(const at::Tensor& x, const std::vector<int64_t>& k,
                    const std::vector<int64_t>& s, const std::vector<int64_t>& p, bool ceil,
                    bool include_pad) {
  switch (k.size()) {
    case 1:
      return at::avg_pool1d(x, k, s, p, ceil, include_pad);
    case 2:
      return at::avg_pool2d(x, k, s, p, ceil, include_pad);
    case 3:
      return at::avg_pool3d(x, k, s, p, ceil, include_pad);
    default:
      throw KernelError(fmt::format("pooling over {} spatial dims is not supported", k.size()));
  }
}

// Average of the window; with explicit padding, count_include_pad=0 divides by the window's
// count of real elements: avg(pad(x)) / avg(pad(ones)).
at::Tensor AveragePool(at::Tensor x, const Geometry& g, bool include_pad) {
  const std::vector<int64_t> in = Spatial(x);
  const size_t n = in.size();
  std::vector<int64_t> s, d;
  std::vector<int64_t> p = g.Resolve(in, g.kernel, &s, &d);
  if (Symmetric(p, g.kernel)) {
    return AvgPoolN(x, g.kernel, s, std::vector<int64_t>(p.begin(), p.begin() + n), g.ceil_mode,
                    include_pad);
  }
  const std::vector<int64_t> zero(n, 0);
  at::Tensor y =
      AvgPoolN(at::constant_pad_nd(x, AtenPadList(p), 0), g.kernel, s, zero, g.ceil_mode, true);
  if (!include_pad) {
    std::vector<int64_t> ones_shape(x.dim(), 1);
    for (size_t i = 0; i < n; ++i) ones_shape[2 + i] = in[i];
    at::Tensor mask = at::constant_pad_nd(at::ones(ones_shape, x.options()), AtenPadList(p), 0);
    y = y / AvgPoolN(mask, g.kernel, s, zero, g.ceil_mode, true);
  }
  return y;
}

// Window sums over zero-padded input for dilated windows (which ATen's avg_pool lacks): a
// depthwise convolution with a dilated all-ones kernel. ceil_mode windows that run past the
// padded input are completed with zeros. `count` gets the number of real (non-pad) elements.
at::Tensor DilatedWindowSum(const at::Tensor& x, const Geometry& g, at::Tensor* count) {
  const std::vector<int64_t> in = Spatial(x);
  const size_t n = in.size();
  std::vector<int64_t> s, d;
  std::vector<int64_t> p = g.Resolve(in, g.kernel, &s, &d);
  std::vector<int64_t> full = p, ones_shape(x.dim(), 1), wshape = {x.size(1), 1};
  for (size_t i = 0; i < n; ++i) {
    const int64_t span = in[i] + p[i] + p[i + n], eff = (g.kernel[i] - 1) * d[i] + 1;
    const int64_t num = span - eff;
    const int64_t out = (g.ceil_mode ? (num + s[i] - 1) / s[i] : num / s[i]) + 1;
    full[i + n] += std::max<int64_t>(0, (out - 1) * s[i] + eff - span);  // ceil_mode overhang
    ones_shape[2 + i] = in[i];
    wshape.push_back(g.kernel[i]);
  }
  const std::vector<int64_t> zero(n, 0);
  auto window_sum = [&](const at::Tensor& v, int64_t groups) {
    std::vector<int64_t> ws = wshape;
    ws[0] = groups;
    return at::convolution(v, at::ones(ws, v.options()), {}, s, zero, d, false, zero, groups);
  };
  if (count != nullptr) {
    *count =
        window_sum(at::constant_pad_nd(at::ones(ones_shape, x.options()), AtenPadList(full), 0), 1);
  }
  return window_sum(at::constant_pad_nd(x, AtenPadList(full), 0), x.size(1));
}

// Dilated average (opset 19): count_include_pad=1 divides by the kernel size, as the reference.
at::Tensor DilatedAveragePool(const at::Tensor& x, const Geometry& g, bool include_pad) {
  at::Tensor count;
  at::Tensor sum = DilatedWindowSum(x, g, include_pad ? nullptr : &count);
  if (!include_pad) return sum / count;
  int64_t window = 1;
  for (int64_t k : g.kernel) window *= k;
  return sum / static_cast<double>(window);
}

Result<KernelPtr> MakeAveragePool(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  if (g.kernel.empty())
    return init.Error(StatusCode::kInvalidModel, "missing attribute kernel_shape");
  bool dilated = false;
  for (int64_t d : g.dilations) dilated = dilated || d != 1;
  const bool include_pad = init.node.GetInt("count_include_pad", 0) != 0;
  return MakeKernel([g, include_pad, dilated](KernelContext& c) {
    return Out{dilated ? DilatedAveragePool(c.in(0), g, include_pad)
                       : AveragePool(c.in(0), g, include_pad)};
  });
}

// LpPool: (sum over the window of |x|^p)^(1/p) = (avg(|x|^p) * window)^(1/p), pads counted as 0.
Result<KernelPtr> MakeLpPool(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  if (g.kernel.empty())
    return init.Error(StatusCode::kInvalidModel, "missing attribute kernel_shape");
  bool dilated = false;
  for (int64_t d : g.dilations) dilated = dilated || d != 1;
  const double p = static_cast<double>(init.node.GetInt("p", 2));
  return MakeKernel([g, p, dilated](KernelContext& c) {
    if (dilated)
      return Out{at::pow(DilatedWindowSum(at::pow(at::abs(c.in(0)), p), g, nullptr), 1.0 / p)};
    int64_t window = 1;
    for (int64_t k : g.kernel) window *= k;
    at::Tensor y = AveragePool(at::pow(at::abs(c.in(0)), p), g, /*include_pad=*/true);
    return Out{at::pow(y * static_cast<double>(window), 1.0 / p)};
  });
}

// Col2Im (18), 2-D images: ATen's col2im (the inverse of im2col / unfold) with symmetric pads.
Result<KernelPtr> MakeCol2Im(const KernelInit& init) {
  const std::vector<int64_t> dil = init.node.GetInts("dilations", {1, 1});
  const std::vector<int64_t> pads = init.node.GetInts("pads", {0, 0, 0, 0});
  const std::vector<int64_t> strides = init.node.GetInts("strides", {1, 1});
  if (dil.size() != 2 || strides.size() != 2 || pads.size() != 4 || pads[0] != pads[2] ||
      pads[1] != pads[3]) {
    return init.Error(StatusCode::kUnsupported, "only 2-D Col2Im with symmetric pads is supported");
  }
  return MakeKernel([=](KernelContext& c) {
    const std::vector<int64_t> image = ToInt64Vector(c.in(1));
    const std::vector<int64_t> block = ToInt64Vector(c.in(2));
    QK_KERNEL_CHECK(image.size() == 2 && block.size() == 2, "only 2-D Col2Im is supported");
    return Out{at::col2im(c.in(0), image, block, dil, {pads[0], pads[1]}, strides)};
  });
}

// MaxUnpool (9, 11): scatters X into zeros at MaxPool's indices, which are flat over the whole
// [N, C, spatial...] pooled input of the default size (in - 1) * stride + kernel - pads, so one
// flat scatter covers every layout. A larger output_shape then zero-pads each spatial dim at the
// end (as the reference does).
Result<KernelPtr> MakeMaxUnpool(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(Geometry g, Geometry::Read(init));
  if (g.kernel.empty())
    return init.Error(StatusCode::kInvalidModel, "missing attribute kernel_shape");
  return MakeKernel([g](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const std::vector<int64_t> in = Spatial(x);
    const size_t n = in.size();
    std::vector<int64_t> shape = {x.size(0), x.size(1)};
    for (size_t i = 0; i < n; ++i) {
      const int64_t s = g.strides.empty() ? 1 : g.strides[i];
      const int64_t pb = g.pads.empty() ? 0 : g.pads[i], pe = g.pads.empty() ? 0 : g.pads[i + n];
      shape.push_back((in[i] - 1) * s + g.kernel[i] - pb - pe);
    }
    int64_t total = 1;
    for (int64_t d : shape) total *= d;
    at::Tensor out = at::zeros({total}, x.options());
    out.scatter_(0, c.in(1).to(at::kLong).reshape({-1}), x.reshape({-1}));
    out = out.reshape(shape);
    if (c.has(2)) {
      const std::vector<int64_t> want = ToInt64Vector(c.in(2));
      QK_KERNEL_CHECK(want.size() == shape.size(), "output_shape has {} dims, expected {}",
                      want.size(), shape.size());
      std::vector<int64_t> pads(2 * n, 0);
      for (size_t i = 0; i < n; ++i) pads[i + n] = want[2 + i] - shape[2 + i];
      out = at::constant_pad_nd(out, AtenPadList(pads), 0);
    }
    return Out{out};
  });
}

enum class GlobalKind { kAvg, kMax, kLp };

template <GlobalKind kind>
Result<KernelPtr> MakeGlobalPool(const KernelInit& init) {
  const double p = static_cast<double>(init.node.GetInt("p", 2));
  return MakeKernel([p](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> dims;
    for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
    switch (kind) {
      case GlobalKind::kAvg:
        return Out{at::mean(x, dims, /*keepdim=*/true)};
      case GlobalKind::kMax:
        return Out{at::amax(x, dims, /*keepdim=*/true)};
      case GlobalKind::kLp:
        return Out{at::pow(at::sum(at::pow(at::abs(x), p), dims, true), 1.0 / p)};
    }
    return Out{};
  });
}

}  // namespace

void AppendConvKernels(KernelTable& t) {
  t.push_back({"", "Conv", 1, kLatestOpset, MakeConv});
  t.push_back({"", "ConvInteger", 10, kLatestOpset, MakeConvInteger});
  t.push_back({"", "QLinearConv", 10, kLatestOpset, MakeQLinearConv});
  t.push_back({"", "ConvTranspose", 1, kLatestOpset, MakeConvTranspose});
  t.push_back({"", "MaxPool", 1, kLatestOpset, MakeMaxPool});
  t.push_back({"", "AveragePool", 1, kLatestOpset, MakeAveragePool});
  t.push_back({"", "LpPool", 2, kLatestOpset, MakeLpPool});
  t.push_back({"", "MaxUnpool", 9, kLatestOpset, MakeMaxUnpool});
  t.push_back({"", "Col2Im", 18, kLatestOpset, MakeCol2Im});
  t.push_back({"", "GlobalAveragePool", 1, kLatestOpset, MakeGlobalPool<GlobalKind::kAvg>});
  t.push_back({"", "GlobalMaxPool", 1, kLatestOpset, MakeGlobalPool<GlobalKind::kMax>});
  t.push_back({"", "GlobalLpPool", 2, kLatestOpset, MakeGlobalPool<GlobalKind::kLp>});
}

}  // namespace quantkit::runtime
