// Indexing: Slice, Gather, GatherElements, GatherND, ScatterElements (and legacy Scatter),
// ScatterND, OneHot, Unique. Negative indices count from the end of the indexed axis.
#include <limits>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// Indices as int64 with negatives wrapped by `size`.
at::Tensor WrapIndices(const at::Tensor& idx, int64_t size) {
  at::Tensor i = idx.to(at::kLong);
  return at::where(i < 0, i + size, i);
}

// Slice: starts/ends/axes are attributes before opset 10, inputs (plus steps) after. Starts and
// ends are clamped as numpy does; negative steps walk backwards (ATen slices need step > 0, so
// they become an index_select).
Result<KernelPtr> MakeSlice(const KernelInit& init) {
  const bool legacy = init.opset < 10;
  const std::vector<int64_t> a_starts = init.node.GetInts("starts");
  const std::vector<int64_t> a_ends = init.node.GetInts("ends");
  const std::vector<int64_t> a_axes = init.node.GetInts("axes");
  return MakeKernel([=](KernelContext& c) {
    at::Tensor x = c.in(0);
    std::vector<int64_t> starts = legacy ? a_starts : ToInt64Vector(c.in(1));
    std::vector<int64_t> ends = legacy ? a_ends : ToInt64Vector(c.in(2));
    std::vector<int64_t> axes =
        legacy ? a_axes : (c.has(3) ? ToInt64Vector(c.in(3)) : std::vector<int64_t>{});
    std::vector<int64_t> steps =
        !legacy && c.has(4) ? ToInt64Vector(c.in(4)) : std::vector<int64_t>{};
    QK_KERNEL_CHECK(starts.size() == ends.size(), "starts has {} values, ends {}", starts.size(),
                    ends.size());
    if (axes.empty()) {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    QK_KERNEL_CHECK(axes.size() == starts.size() && steps.size() == starts.size(),
                    "starts/ends/axes/steps lengths differ");
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t a = NormAxis(axes[i], x.dim());
      const int64_t dim = x.size(a);
      const int64_t step = steps[i];
      QK_KERNEL_CHECK(step != 0, "step must not be 0");
      int64_t s = starts[i], e = ends[i];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        x = x.slice(a, s, std::max(s, e), step);
      } else {
        s = std::clamp<int64_t>(s, -1, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        const at::TensorOptions longs = x.options().dtype(at::kLong);  // indices where x is
        at::Tensor idx = s > e ? at::arange(s, e, step, longs) : at::empty({0}, longs);
        x = x.index_select(a, idx);
      }
    }
    return Out{x};
  });
}

Result<KernelPtr> MakeGather(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 0);
  return MakeKernel([axis](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    const at::Tensor& idx = c.in(1);
    at::Tensor flat =
        WrapIndices(idx, x.size(a)).reshape({-1}).to(x.device());  // host shape indices too
    at::Tensor g = x.index_select(a, flat);
    std::vector<int64_t> shape = x.sizes().slice(0, a).vec();
    for (int64_t d : idx.sizes()) shape.push_back(d);
    for (int64_t d : x.sizes().slice(a + 1)) shape.push_back(d);
    return Out{g.reshape(shape)};
  });
}

Result<KernelPtr> MakeGatherElements(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 0);
  return MakeKernel([axis](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    return Out{at::gather(x, a, WrapIndices(c.in(1), x.size(a)).to(x.device()))};
  });
}

// Linear offsets of the index tuples in the last axis of `idx` into data dims [b, b+k).
at::Tensor LinearIndex(const at::Tensor& data, const at::Tensor& idx, int64_t b) {
  const int64_t k = idx.size(-1);
  at::Tensor lin = at::zeros(idx.sizes().slice(0, idx.dim() - 1), idx.options().dtype(at::kLong));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t size = data.size(b + j);
    lin = lin * size + WrapIndices(idx.select(-1, j), size);
  }
  return lin;
}

// GatherND with batch_dims b: data [B..., D_k..., tail...], indices [B..., M..., k].
Result<KernelPtr> MakeGatherND(const KernelInit& init) {
  const int64_t b = init.node.GetInt("batch_dims", 0);
  return MakeKernel([b](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& idx = c.in(1);
    const int64_t k = idx.size(-1);
    QK_KERNEL_CHECK(b + k <= x.dim(), "batch_dims + index depth {} exceeds data rank {}", b + k,
                    x.dim());
    int64_t batch = 1;
    for (int64_t i = 0; i < b; ++i) batch *= x.size(i);
    std::vector<int64_t> tail = x.sizes().slice(b + k).vec();
    int64_t kprod = 1;
    for (int64_t i = 0; i < k; ++i) kprod *= x.size(b + i);
    std::vector<int64_t> dshape = {batch, kprod};
    dshape.insert(dshape.end(), tail.begin(), tail.end());
    at::Tensor data = x.reshape(dshape);
    at::Tensor lin = LinearIndex(x, idx, b).reshape({batch, -1}).to(x.device());
    at::Tensor bidx = at::arange(batch, lin.options()).unsqueeze(1).expand_as(lin);
    at::Tensor g = data.index({bidx, lin});
    std::vector<int64_t> shape = idx.sizes().slice(0, idx.dim() - 1).vec();
    shape.insert(shape.end(), tail.begin(), tail.end());
    return Out{g.reshape(shape)};
  });
}

// ScatterElements (and Scatter, its opset 9-10 name). reduction none|add|mul (16), max|min (18).
Result<KernelPtr> MakeScatterElements(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 0);
  const std::string reduction = init.node.GetString("reduction", "none");
  std::string aten_reduce;
  if (reduction == "add")
    aten_reduce = "sum";
  else if (reduction == "mul")
    aten_reduce = "prod";
  else if (reduction == "max")
    aten_reduce = "amax";
  else if (reduction == "min")
    aten_reduce = "amin";
  else if (reduction != "none")
    return init.Error(StatusCode::kInvalidModel, "unknown reduction '{}'", reduction);
  return MakeKernel([axis, aten_reduce](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    at::Tensor idx = WrapIndices(c.in(1), x.size(a)).to(x.device());
    const at::Tensor upd = c.in(2).to(x.device());
    if (aten_reduce.empty()) return Out{at::scatter(x, a, idx, upd)};
    return Out{at::scatter_reduce(x, a, idx, upd, aten_reduce, /*include_self=*/true)};
  });
}

Result<KernelPtr> MakeScatterND(const KernelInit& init) {
  const std::string reduction = init.node.GetString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min") {
    return init.Error(StatusCode::kInvalidModel, "unknown reduction '{}'", reduction);
  }
  return MakeKernel([reduction](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& idx = c.in(1);
    const at::Tensor& upd = c.in(2);
    const int64_t k = idx.size(-1);
    int64_t kprod = 1;
    for (int64_t i = 0; i < k; ++i) kprod *= x.size(i);
    std::vector<int64_t> tail = x.sizes().slice(k).vec();
    at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
    std::vector<int64_t> oshape = {kprod};
    oshape.insert(oshape.end(), tail.begin(), tail.end());
    at::Tensor view = out.view(oshape);
    at::Tensor lin = LinearIndex(x, idx, 0).reshape({-1}).to(x.device());
    std::vector<int64_t> ushape = {lin.size(0)};
    ushape.insert(ushape.end(), tail.begin(), tail.end());
    at::Tensor u = upd.reshape(ushape).to(x.device());
    if (reduction == "none") {
      view.index_put_({lin}, u);
    } else if (reduction == "add") {
      view.index_put_({lin}, u, /*accumulate=*/true);
    } else {
      view.index_reduce_(0, lin, u,
                         reduction == "mul" ? "prod" : (reduction == "max" ? "amax" : "amin"));
    }
    return Out{out};
  });
}

// OneHot: out[..., j, ...] = indices == j ? on : off along `axis`; negative indices count from
// depth, out-of-range ones give an all-off row.
Result<KernelPtr> MakeOneHot(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", -1);
  return MakeKernel([axis](KernelContext& c) {
    const at::Tensor& ind = c.in(0);
    const int64_t depth = static_cast<int64_t>(ToDoubleVector(c.in(1)).at(0));
    const at::Tensor& values = c.in(2);
    const int64_t rank = ind.dim() + 1;
    const int64_t a = NormAxis(axis, rank);
    at::Tensor i = ind.to(at::kDouble).floor().to(at::kLong);
    i = at::where(i < 0, i + depth, i).unsqueeze(a);
    std::vector<int64_t> rshape(rank, 1);
    rshape[a] = depth;
    at::Tensor mask = i == at::arange(depth, i.options()).reshape(rshape);
    at::Tensor v = values.reshape({-1}).to(i.device());
    return Out{at::where(mask, v[1], v[0])};
  });
}

// Unique (11): unique values (or slices along `axis`), ascending when sorted=1, else in order
// of first occurrence; plus first-occurrence indices, inverse indices and counts (all int64).
Result<KernelPtr> MakeUnique(const KernelInit& init) {
  const bool has_axis = init.node.has_attr("axis");
  const int64_t axis = init.node.GetInt("axis", 0);
  const bool sorted = init.node.GetInt("sorted", 1) != 0;
  return MakeKernel([=](KernelContext& c) {
    at::Tensor x = has_axis ? c.in(0) : c.in(0).reshape({-1});
    const int64_t a = has_axis ? NormAxis(axis, x.dim()) : 0;
    auto [y, inverse, counts] =
        at::unique_dim(x, a, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/true);
    inverse = inverse.reshape({-1});
    const int64_t n = inverse.numel(), k = y.size(a);
    // First occurrence of each unique entry: the smallest position mapping to it.
    at::Tensor first = at::full({k}, n, inverse.options())
                           .scatter_reduce(0, inverse, at::arange(n, inverse.options()), "amin");
    if (!sorted) {
      at::Tensor perm = at::argsort(first);
      at::Tensor rank = at::empty_like(perm).scatter_(0, perm, at::arange(k, perm.options()));
      y = y.index_select(a, perm);
      first = first.index_select(0, perm);
      counts = counts.index_select(0, perm);
      inverse = rank.index_select(0, inverse);
    }
    return Out{y, first, inverse, counts};
  });
}

}  // namespace

void AppendIndexKernels(KernelTable& t) {
  t.push_back({"", "Slice", 1, kLatestOpset, MakeSlice});
  t.push_back({"", "Gather", 1, kLatestOpset, MakeGather});
  t.push_back({"", "GatherElements", 11, kLatestOpset, MakeGatherElements});
  t.push_back({"", "GatherND", 11, kLatestOpset, MakeGatherND});
  t.push_back({"", "Scatter", 9, 10, MakeScatterElements});
  t.push_back({"", "ScatterElements", 11, kLatestOpset, MakeScatterElements});
  t.push_back({"", "ScatterND", 11, kLatestOpset, MakeScatterND});
  t.push_back({"", "OneHot", 9, kLatestOpset, MakeOneHot});
  t.push_back({"", "Unique", 11, kLatestOpset, MakeUnique});
}

}  // namespace quantkit::runtime
