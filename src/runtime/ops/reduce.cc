// Reductions: ReduceMean/Sum/Max/Min/Prod/L1/L2/LogSumExp/SumSquare, ArgMax, ArgMin.
//
// Axes are an attribute before opset 13 (ReduceSum) / 18 (the others) and an optional input from
// then on; with no axes every dimension is reduced unless noop_with_empty_axes=1. Reducing an
// empty set gives the reduction's identity (0 for sums, 1 for Prod, -inf for Max/LogSumExp, +inf
// for Min), which ATen's amax/amin refuse, so that case is handled before calling them.
#include <cmath>
#include <limits>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

enum class Red { kMean, kSum, kMax, kMin, kProd, kL1, kL2, kLogSumExp, kSumSquare, kLogSum };

at::Tensor Reduce(Red op, const at::Tensor& x, std::vector<int64_t> dims, bool keep) {
  const at::ScalarType dtype = x.scalar_type();
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.size(d);
  if (count == 0 || x.numel() == 0) {
    std::vector<int64_t> shape = x.sizes().vec();
    for (int64_t d : dims) shape[d] = 1;
    double fill = 0;
    const double inf = std::numeric_limits<double>::infinity();
    switch (op) {
      case Red::kProd:
        fill = 1;
        break;
      case Red::kMax:
      case Red::kLogSumExp:
      case Red::kLogSum:
        fill = -inf;
        break;
      case Red::kMin:
        fill = inf;
        break;
      case Red::kMean:
        fill = std::nan("");
        break;
      default:
        break;
    }
    at::Tensor r = at::full(shape, fill, x.options());
    if (!keep) {
      std::sort(dims.rbegin(), dims.rend());
      for (int64_t d : dims) r = r.squeeze(d);
    }
    return r;
  }
  at::Tensor v = x;
  switch (op) {
    case Red::kMean:
      if (integral) return at::mean(v.to(at::kDouble), dims, keep).to(dtype);
      return at::mean(v, dims, keep);
    case Red::kSum:
      return at::sum(v, dims, keep).to(dtype);
    case Red::kMax:
      return at::amax(v, dims, keep);
    case Red::kMin:
      return at::amin(v, dims, keep);
    case Red::kProd: {
      std::sort(dims.rbegin(), dims.rend());  // reduce high dims first so indices stay valid
      for (int64_t d : dims) v = at::prod(v, d, keep);
      return v.to(dtype);
    }
    case Red::kL1:
      return at::sum(at::abs(v), dims, keep).to(dtype);
    case Red::kL2:
      if (integral) return at::sqrt(at::sum(v.to(at::kDouble).square(), dims, keep)).to(dtype);
      return at::sqrt(at::sum(v * v, dims, keep));
    case Red::kLogSumExp:
      return at::logsumexp(v, dims, keep);
    case Red::kSumSquare:
      return at::sum(v * v, dims, keep).to(dtype);
    case Red::kLogSum:
      return at::log(at::sum(v, dims, keep));
  }
  return v;
}

template <Red op>
Result<KernelPtr> MakeReduce(const KernelInit& init) {
  // ReduceSum took its axes as an input at 13, the others at 18.
  const int64_t input_axes_since = op == Red::kSum ? 13 : 18;
  const bool axes_input = init.opset >= input_axes_since;
  const std::vector<int64_t> attr_axes = init.node.GetInts("axes");
  if (axes_input && init.node.has_attr("axes")) {
    return init.Error(StatusCode::kInvalidModel, "attribute 'axes' is an input from opset {}",
                      input_axes_since);
  }
  const bool keep = init.node.GetInt("keepdims", 1) != 0;
  const bool noop_empty = init.node.GetInt("noop_with_empty_axes", 0) != 0;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> axes = attr_axes;
    if (axes_input && c.has(1)) axes = ToInt64Vector(c.in(1));
    if (axes.empty()) {
      if (noop_empty) return Out{x};
      for (int64_t i = 0; i < x.dim(); ++i) axes.push_back(i);
    }
    for (int64_t& a : axes) a = NormAxis(a, x.dim());
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    return Out{Reduce(op, x, axes, keep)};
  });
}

// ArgMax/ArgMin; select_last_index picks the last extreme by searching the flipped axis.
template <bool kMax>
Result<KernelPtr> MakeArg(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 0);
  const bool keep = init.node.GetInt("keepdims", 1) != 0;
  const bool last = init.node.GetInt("select_last_index", 0) != 0;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    at::Tensor v = last ? x.flip(a) : x;
    at::Tensor idx = kMax ? at::argmax(v, a, keep) : at::argmin(v, a, keep);
    if (last) idx = (x.size(a) - 1) - idx;
    return Out{idx};
  });
}

}  // namespace

void AppendReduceKernels(KernelTable& t) {
  t.push_back({"", "ReduceMean", 1, kLatestOpset, MakeReduce<Red::kMean>});
  t.push_back({"", "ReduceSum", 1, kLatestOpset, MakeReduce<Red::kSum>});
  t.push_back({"", "ReduceMax", 1, kLatestOpset, MakeReduce<Red::kMax>});
  t.push_back({"", "ReduceMin", 1, kLatestOpset, MakeReduce<Red::kMin>});
  t.push_back({"", "ReduceProd", 1, kLatestOpset, MakeReduce<Red::kProd>});
  t.push_back({"", "ReduceL1", 1, kLatestOpset, MakeReduce<Red::kL1>});
  t.push_back({"", "ReduceL2", 1, kLatestOpset, MakeReduce<Red::kL2>});
  t.push_back({"", "ReduceLogSumExp", 1, kLatestOpset, MakeReduce<Red::kLogSumExp>});
  t.push_back({"", "ReduceSumSquare", 1, kLatestOpset, MakeReduce<Red::kSumSquare>});
  t.push_back({"", "ReduceLogSum", 1, kLatestOpset, MakeReduce<Red::kLogSum>});
  t.push_back({"", "ArgMax", 1, kLatestOpset, MakeArg<true>});
  t.push_back({"", "ArgMin", 1, kLatestOpset, MakeArg<false>});
}

}  // namespace quantkit::runtime
