// Matrix products and softmax-like ops: MatMul, Gemm, Einsum, Softmax, LogSoftmax, Hardmax,
// TopK, CumSum, Trilu, Range.
#include <cmath>

#include "runtime/kernel.h"
#include "runtime/ops/float_gemm.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

Result<KernelPtr> MakeMatMul(const KernelInit&) {
  return MakeKernel([](KernelContext& c) { return Out{MatMul(c.in(0), c.in(1))}; });
}

// Y = alpha * A' * B' + beta * C (C broadcast, optional from opset 11).
Result<KernelPtr> MakeGemm(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 1.0f);
  const double beta = init.node.GetFloat("beta", 1.0f);
  const bool trans_a = init.node.GetInt("transA", 0) != 0;
  const bool trans_b = init.node.GetInt("transB", 0) != 0;
  return MakeKernel([=](KernelContext& c) {
    at::Tensor a = trans_a ? c.in(0).t() : c.in(0);
    at::Tensor b = trans_b ? c.in(1).t() : c.in(1);
    QK_KERNEL_CHECK(a.dim() == 2 && b.dim() == 2, "A and B must be 2-D, got ranks {} and {}",
                    a.dim(), b.dim());
    at::Tensor y = MatMul2d(a, b);
    if (alpha != 1.0) y = y * alpha;
    if (c.has(2) && beta != 0.0) y = y + (beta == 1.0 ? c.in(2) : c.in(2) * beta);
    return Out{y.to(c.in(0).scalar_type())};
  });
}

Result<KernelPtr> MakeEinsum(const KernelInit& init) {
  std::string eq;
  for (char ch : init.node.GetString("equation", "")) {
    if (ch != ' ') eq += ch;
  }
  if (eq.empty()) return init.Error(StatusCode::kInvalidModel, "missing attribute 'equation'");
  return MakeKernel([eq](KernelContext& c) {
    std::vector<at::Tensor> ops;
    for (size_t i = 0; i < c.num_inputs(); ++i) ops.push_back(c.in(i));
    return Out{at::einsum(eq, ops)};
  });
}

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

// Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalised over the
// flattened tail; from 13 the op works on one axis (default -1).
template <SoftKind kind>
Result<KernelPtr> MakeSoftmax(const KernelInit& init) {
  const bool legacy = init.opset < 13;
  const int64_t axis = init.node.GetInt("axis", legacy ? 1 : -1);
  return MakeKernel([legacy, axis](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    at::Tensor v = x;
    int64_t dim = a;
    if (legacy) {
      const int64_t outer =
          x.sizes().slice(0, a).empty() ? 1 : c10::multiply_integers(x.sizes().slice(0, a));
      v = x.reshape({outer, -1});
      dim = 1;
    }
    at::Tensor y;
    switch (kind) {
      case SoftKind::kSoftmax:
        y = at::softmax(v, dim);
        break;
      case SoftKind::kLogSoftmax:
        y = at::log_softmax(v, dim);
        break;
      case SoftKind::kHardmax: {
        // One-hot of the first maximum along dim.
        at::Tensor idx = at::argmax(v, dim, /*keepdim=*/true);
        y = at::zeros_like(v).scatter_(dim, idx, 1);
        break;
      }
    }
    return Out{y.reshape(x.sizes())};
  });
}

// TopK: k is an attribute before opset 10, an input after. Ties keep the lower index first.
Result<KernelPtr> MakeTopK(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", -1);
  const bool largest = init.node.GetInt("largest", 1) != 0;
  const bool sorted = init.node.GetInt("sorted", 1) != 0;
  const int64_t k_attr = init.opset < 10 ? init.node.GetInt("k", -1) : -1;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    const int64_t k = k_attr >= 0 ? k_attr : ToInt64Vector(c.in(1)).at(0);
    QK_KERNEL_CHECK(k >= 0 && k <= x.size(a), "k={} out of range for axis size {}", k, x.size(a));
    // A stable sort gives the ONNX tie order (lower index first) whatever ATen's topk does.
    auto [vals, idx] = at::sort(x, /*stable=*/true, a, /*descending=*/largest);
    vals = vals.narrow(a, 0, k);
    idx = idx.narrow(a, 0, k);
    (void)sorted;  // always sorted: allowed by the spec
    return Out{vals, idx};
  });
}

Result<KernelPtr> MakeCumSum(const KernelInit& init) {
  const bool exclusive = init.node.GetInt("exclusive", 0) != 0;
  const bool reverse = init.node.GetInt("reverse", 0) != 0;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(ToInt64Vector(c.in(1)).at(0), x.dim());
    at::Tensor v = reverse ? x.flip(a) : x;
    at::Tensor y = at::cumsum(v, a).to(x.scalar_type());
    if (exclusive) y = y - v;
    if (reverse) y = y.flip(a);
    return Out{y};
  });
}

Result<KernelPtr> MakeTrilu(const KernelInit& init) {
  const bool upper = init.node.GetInt("upper", 1) != 0;
  return MakeKernel([upper](KernelContext& c) {
    const int64_t k = c.has(1) ? ToInt64Vector(c.in(1)).at(0) : 0;
    return Out{upper ? at::triu(c.in(0), k) : at::tril(c.in(0), k)};
  });
}

// Range: n = max(ceil((limit - start) / delta), 0) elements start + i * delta.
Result<KernelPtr> MakeRange(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& s = c.in(0);
    const double start = ToDoubleVector(s).at(0);
    const double limit = ToDoubleVector(c.in(1)).at(0);
    const double delta = ToDoubleVector(c.in(2)).at(0);
    QK_KERNEL_CHECK(delta != 0, "delta must not be 0");
    const int64_t n =
        std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
    if (at::isIntegralType(s.scalar_type(), false)) {
      return Out{(at::arange(n, s.options().dtype(at::kLong)) * static_cast<int64_t>(delta) +
                  static_cast<int64_t>(start))
                     .to(s.scalar_type())};
    }
    // Accumulate like the reference (start + i*delta in the input dtype).
    return Out{at::arange(n, s.options()) * c.in(2).reshape({}) + s.reshape({})};
  });
}

}  // namespace

void AppendMathKernels(KernelTable& t) {
  t.push_back({"", "MatMul", 1, kLatestOpset, MakeMatMul});
  t.push_back({"", "Gemm", 1, kLatestOpset, MakeGemm});
  t.push_back({"", "Einsum", 12, kLatestOpset, MakeEinsum});
  t.push_back({"", "Softmax", 1, kLatestOpset, MakeSoftmax<SoftKind::kSoftmax>});
  t.push_back({"", "LogSoftmax", 1, kLatestOpset, MakeSoftmax<SoftKind::kLogSoftmax>});
  t.push_back({"", "Hardmax", 1, kLatestOpset, MakeSoftmax<SoftKind::kHardmax>});
  t.push_back({"", "TopK", 1, kLatestOpset, MakeTopK});
  t.push_back({"", "CumSum", 11, kLatestOpset, MakeCumSum});
  t.push_back({"", "Trilu", 14, kLatestOpset, MakeTrilu});
  t.push_back({"", "Range", 11, kLatestOpset, MakeRange});
}

}  // namespace quantkit::runtime
