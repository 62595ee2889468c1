// Shape manipulation: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Concat, Split, Expand,
// Tile, Pad, Shape, Size, ConstantOfShape, Constant, Dropout (inference), DepthToSpace,
// SpaceToDepth, NonZero.
//
// Results may be ATen views of their inputs (Reshape, Transpose, Expand...): tensors are never
// written in place, so sharing storage is safe and saves copies.
#include "runtime/aten_bridge.h"
#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

int64_t Prod(at::IntArrayRef v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

Result<KernelPtr> MakeFlatten(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  return MakeKernel([axis](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    QK_KERNEL_CHECK(a >= 0 && a <= x.dim(), "axis {} out of range for rank {}", axis, x.dim());
    return Out{x.reshape({Prod(x.sizes().slice(0, a)), Prod(x.sizes().slice(a))})};
  });
}

// Reshape: 0 copies the input dim (unless allowzero=1), -1 is inferred.
Result<KernelPtr> MakeReshape(const KernelInit& init) {
  const bool allow_zero = init.node.GetInt("allowzero", 0) != 0;
  const std::vector<int64_t> attr_shape =
      init.opset < 5 ? init.node.GetInts("shape") : std::vector<int64_t>{};
  const bool legacy = init.opset < 5;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> shape = legacy ? attr_shape : ToInt64Vector(c.in(1));
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allow_zero) {
        QK_KERNEL_CHECK(static_cast<int64_t>(i) < x.dim(), "shape[{}]=0 but input rank is {}", i,
                        x.dim());
        shape[i] = x.size(static_cast<int64_t>(i));
      }
    }
    return Out{x.reshape(shape)};
  });
}

Result<KernelPtr> MakeTranspose(const KernelInit& init) {
  const std::vector<int64_t> perm = init.node.GetInts("perm");
  return MakeKernel([perm](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> p = perm;
    if (p.empty()) {
      for (int64_t i = x.dim() - 1; i >= 0; --i) p.push_back(i);
    }
    QK_KERNEL_CHECK(static_cast<int64_t>(p.size()) == x.dim(), "perm has {} entries for rank {}",
                    p.size(), x.dim());
    return Out{x.permute(p)};
  });
}

// Axes: attribute before opset 13, input from 13.
std::vector<int64_t> AxesOf(KernelContext& c, bool from_input, const std::vector<int64_t>& attr,
                            size_t index) {
  if (!from_input) return attr;
  return c.has(index) ? ToInt64Vector(c.in(index)) : std::vector<int64_t>{};
}

Result<KernelPtr> MakeSqueeze(const KernelInit& init) {
  const bool from_input = init.opset >= 13;
  const std::vector<int64_t> attr = init.node.GetInts("axes");
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> axes = AxesOf(c, from_input, attr, 1);
    std::vector<int64_t> shape;
    std::vector<bool> drop(x.dim(), false);
    if (axes.empty()) {
      for (int64_t i = 0; i < x.dim(); ++i) drop[i] = x.size(i) == 1;
    }
    for (int64_t a : axes) {
      a = NormAxis(a, x.dim());
      QK_KERNEL_CHECK(x.size(a) == 1, "cannot squeeze axis {} of size {}", a, x.size(a));
      drop[a] = true;
    }
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (!drop[i]) shape.push_back(x.size(i));
    }
    return Out{x.reshape(shape)};
  });
}

Result<KernelPtr> MakeUnsqueeze(const KernelInit& init) {
  const bool from_input = init.opset >= 13;
  const std::vector<int64_t> attr = init.node.GetInts("axes");
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> axes = AxesOf(c, from_input, attr, 1);
    const int64_t out_rank = x.dim() + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(out_rank, false);
    for (int64_t a : axes) {
      a = NormAxis(a, out_rank);
      QK_KERNEL_CHECK(!inserted[a], "axis {} repeated", a);
      inserted[a] = true;
    }
    std::vector<int64_t> shape;
    int64_t src = 0;
    for (int64_t i = 0; i < out_rank; ++i) shape.push_back(inserted[i] ? 1 : x.size(src++));
    return Out{x.reshape(shape)};
  });
}

Result<KernelPtr> MakeConcat(const KernelInit& init) {
  if (!init.node.has_attr("axis") && init.opset >= 4) {
    return init.Error(StatusCode::kInvalidModel, "missing attribute 'axis'");
  }
  const int64_t axis = init.node.GetInt("axis", 1);
  return MakeKernel([axis](KernelContext& c) {
    std::vector<at::Tensor> xs;
    for (size_t i = 0; i < c.num_inputs(); ++i) xs.push_back(c.in(i));
    return Out{at::cat(xs, NormAxis(axis, xs.at(0).dim()))};
  });
}

// Split: sizes from the 'split' attribute (< 13) or input (>= 13), else num_outputs (18) equal
// chunks with a smaller last one, else equal parts.
Result<KernelPtr> MakeSplit(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 0);
  const bool from_input = init.opset >= 13;
  const std::vector<int64_t> attr = init.node.GetInts("split");
  const int64_t num_outputs = init.node.GetInt("num_outputs", 0);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    std::vector<int64_t> sizes =
        from_input ? (c.has(1) ? ToInt64Vector(c.in(1)) : std::vector<int64_t>{}) : attr;
    const int64_t n = static_cast<int64_t>(c.num_outputs());
    const int64_t dim = x.size(a);
    if (sizes.empty()) {
      const int64_t chunk = num_outputs > 0 ? (dim + n - 1) / n : dim / n;
      QK_KERNEL_CHECK(num_outputs > 0 || dim % n == 0,
                      "axis size {} is not divisible into {} outputs", dim, n);
      for (int64_t i = 0, left = dim; i < n; ++i) {
        sizes.push_back(std::min(chunk, left));
        left -= sizes.back();
      }
    }
    QK_KERNEL_CHECK(static_cast<int64_t>(sizes.size()) == n, "split has {} sizes for {} outputs",
                    sizes.size(), n);
    Out out;
    int64_t start = 0;
    for (int64_t s : sizes) {
      out.push_back(x.narrow(a, start, s));
      start += s;
    }
    QK_KERNEL_CHECK(start == dim, "split sizes sum to {}, axis size is {}", start, dim);
    return out;
  });
}

// Expand broadcasts both ways: the result shape is broadcast(x.shape, shape).
Result<KernelPtr> MakeExpand(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const std::vector<int64_t> shape = ToInt64Vector(c.in(1));
    const std::vector<int64_t> target = at::infer_size(x.sizes(), shape);
    return Out{x.expand(target)};
  });
}

Result<KernelPtr> MakeTile(const KernelInit&) {
  return MakeKernel([](KernelContext& c) { return Out{c.in(0).repeat(ToInt64Vector(c.in(1)))}; });
}

// Pad. Modes constant / reflect / edge / wrap; pads (and the constant) are attributes before
// opset 11, inputs after; axes (18) restricts which dims the pads refer to. Non-constant modes
// gather with a per-axis index map (also handles negative pads).
Result<KernelPtr> MakePad(const KernelInit& init) {
  const std::string mode = init.node.GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return init.Error(StatusCode::kInvalidModel, "unknown mode '{}'", mode);
  }
  const bool legacy = init.opset < 11;
  const std::vector<int64_t> attr_pads = init.node.GetInts(init.opset < 2 ? "paddings" : "pads");
  const double attr_value = init.node.GetFloat("value", 0.0f);
  return MakeKernel([=](KernelContext& c) {
    at::Tensor x = c.in(0);
    const int64_t rank = x.dim();
    std::vector<int64_t> pads = legacy ? attr_pads : ToInt64Vector(c.in(1));
    std::vector<int64_t> axes;
    if (!legacy && c.has(3)) {
      for (int64_t a : ToInt64Vector(c.in(3))) axes.push_back(NormAxis(a, rank));
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    const size_t n = axes.size();
    QK_KERNEL_CHECK(pads.size() == 2 * n, "pads has {} values for {} axes", pads.size(), n);
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    for (size_t i = 0; i < n; ++i) {
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[i + n];
    }
    if (mode == "constant") {
      at::Scalar value = attr_value;
      if (!legacy && c.has(2) && c.in(2).numel() > 0) value = c.in(2).reshape({-1})[0].item();
      std::vector<int64_t> list;
      for (int64_t d = rank; d-- > 0;) {
        list.push_back(begin[d]);
        list.push_back(end[d]);
      }
      if (at::isFloatingType(x.scalar_type())) return Out{at::constant_pad_nd(x, list, value)};
      // constant_pad_nd needs a value of the tensor's kind; integers and bool pad exactly.
      return Out{at::constant_pad_nd(x, list, value.toLong()).to(x.scalar_type())};
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (begin[d] == 0 && end[d] == 0) continue;
      const int64_t size = x.size(d);
      QK_KERNEL_CHECK(size > 0, "cannot {}-pad an empty axis {}", mode, d);
      at::Tensor i = at::arange(-begin[d], size + end[d], x.options().dtype(at::kLong));
      if (mode == "edge") {
        i = at::clamp(i, 0, size - 1);
      } else if (mode == "wrap") {
        i = at::remainder(i, size);
      } else if (size == 1) {
        i = at::zeros_like(i);
      } else {
        const int64_t period = 2 * (size - 1);
        i = at::remainder(i, period);
        i = at::where(i >= size, period - i, i);
      }
      x = x.index_select(d, i);
    }
    return Out{x};
  });
}

Result<KernelPtr> MakeShape(const KernelInit& init) {
  const int64_t start_attr = init.node.GetInt("start", 0);
  const bool has_end = init.node.has_attr("end");
  const int64_t end_attr = init.node.GetInt("end", 0);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t r = x.dim();
    auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t s = clampi(start_attr);
    const int64_t e = has_end ? clampi(end_attr) : r;
    std::vector<int64_t> dims;
    for (int64_t i = s; i < e; ++i) dims.push_back(x.size(i));
    return Out{at::tensor(dims, at::kLong).reshape({static_cast<int64_t>(dims.size())})};
  });
}

Result<KernelPtr> MakeSize(const KernelInit&) {
  return MakeKernel(
      [](KernelContext& c) { return Out{at::scalar_tensor(c.in(0).numel(), at::kLong)}; });
}

Result<KernelPtr> MakeConstantOfShape(const KernelInit& init) {
  at::Tensor value = at::zeros({1}, at::kFloat);
  if (const ir::Attribute* a = init.node.attr("value")) {
    QK_ASSIGN_OR_RETURN(value, CopyToAten(a->t, init.Where() + ": attribute 'value'"));
    if (value.numel() != 1)
      return init.Error(StatusCode::kInvalidModel, "attribute 'value' must hold one element");
  }
  return MakeKernel([value](KernelContext& c) {
    const std::vector<int64_t> shape = ToInt64Vector(c.in(0));
    for (int64_t d : shape) QK_KERNEL_CHECK(d >= 0, "negative dimension {} in shape", d);
    return Out{at::full(shape, value.reshape({-1})[0].item(), value.options())};
  });
}

// Constant: the value is converted once at construction and shared by every run.
Result<KernelPtr> MakeConstant(const KernelInit& init) {
  at::Tensor value;
  const ir::Node& n = init.node;
  if (const ir::Attribute* a = n.attr("value")) {
    QK_ASSIGN_OR_RETURN(value, CopyToAten(a->t, init.Where() + ": attribute 'value'"));
  } else if (n.has_attr("value_float")) {
    value = at::scalar_tensor(n.GetFloat("value_float", 0), at::kFloat);
  } else if (n.has_attr("value_int")) {
    value = at::scalar_tensor(n.GetInt("value_int", 0), at::kLong);
  } else if (n.has_attr("value_floats")) {
    std::vector<float> v = n.GetFloats("value_floats");
    value = at::tensor(v, at::kFloat).reshape({static_cast<int64_t>(v.size())});
  } else if (n.has_attr("value_ints")) {
    std::vector<int64_t> v = n.GetInts("value_ints");
    value = at::tensor(v, at::kLong).reshape({static_cast<int64_t>(v.size())});
  } else {
    return init.Error(StatusCode::kUnsupported,
                      "only tensor/float/int Constant values are supported");
  }
  return MakeKernel([value](KernelContext&) { return Out{value}; });
}

// Dropout at inference is the identity; the optional mask is all true.
Result<KernelPtr> MakeDropout(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    if (c.has(2) && ToInt64Vector(c.in(2)).at(0) != 0) {
      // Training mode is random unless the ratio is 0 (then it is the identity as well).
      const double ratio = c.has(1) ? ToDoubleVector(c.in(1)).at(0) : 0.5;
      QK_KERNEL_CHECK(ratio == 0,
                      "training_mode=true with ratio {} is not supported (inference only)", ratio);
    }
    Out out{x};
    if (c.num_outputs() > 1) out.push_back(at::ones(x.sizes(), x.options().dtype(at::kBool)));
    return out;
  });
}

Result<KernelPtr> MakeDepthToSpace(const KernelInit& init) {
  const int64_t b = init.node.GetInt("blocksize", 0);
  const bool crd = init.node.GetString("mode", "DCR") == "CRD";
  if (b <= 0) return init.Error(StatusCode::kInvalidModel, "blocksize must be positive");
  return MakeKernel([b, crd](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    QK_KERNEL_CHECK(x.dim() == 4, "expected rank 4, got {}", x.dim());
    const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    at::Tensor y = crd ? x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3})
                       : x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
    return Out{y.reshape({n, ch / (b * b), h * b, w * b})};
  });
}

Result<KernelPtr> MakeSpaceToDepth(const KernelInit& init) {
  const int64_t b = init.node.GetInt("blocksize", 0);
  if (b <= 0) return init.Error(StatusCode::kInvalidModel, "blocksize must be positive");
  return MakeKernel([b](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    QK_KERNEL_CHECK(x.dim() == 4, "expected rank 4, got {}", x.dim());
    const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    at::Tensor y = x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4});
    return Out{y.reshape({n, ch * b * b, h / b, w / b})};
  });
}

Result<KernelPtr> MakeNonZero(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    if (x.dim() == 0)
      return Out{at::zeros({0, x.item().toBool() ? 1 : 0}, x.options().dtype(at::kLong))};
    return Out{at::nonzero(x).t()};
  });
}

}  // namespace

void AppendShapeKernels(KernelTable& t) {
  t.push_back({"", "Flatten", 1, kLatestOpset, MakeFlatten});
  t.push_back({"", "Reshape", 1, kLatestOpset, MakeReshape});
  t.push_back({"", "Transpose", 1, kLatestOpset, MakeTranspose});
  t.push_back({"", "Squeeze", 1, kLatestOpset, MakeSqueeze});
  t.push_back({"", "Unsqueeze", 1, kLatestOpset, MakeUnsqueeze});
  t.push_back({"", "Concat", 1, kLatestOpset, MakeConcat});
  t.push_back({"", "Split", 1, kLatestOpset, MakeSplit});
  t.push_back({"", "Expand", 8, kLatestOpset, MakeExpand});
  t.push_back({"", "Tile", 6, kLatestOpset, MakeTile});
  t.push_back({"", "Pad", 1, kLatestOpset, MakePad});
  t.push_back({"", "Shape", 1, kLatestOpset, MakeShape});
  t.push_back({"", "Size", 1, kLatestOpset, MakeSize});
  t.push_back({"", "ConstantOfShape", 9, kLatestOpset, MakeConstantOfShape});
  t.push_back({"", "Constant", 1, kLatestOpset, MakeConstant});
  t.push_back({"", "Dropout", 1, kLatestOpset, MakeDropout});
  t.push_back({"", "DepthToSpace", 1, kLatestOpset, MakeDepthToSpace});
  t.push_back({"", "SpaceToDepth", 1, kLatestOpset, MakeSpaceToDepth});
  t.push_back({"", "NonZero", 9, kLatestOpset, MakeNonZero});
}

}  // namespace quantkit::runtime
