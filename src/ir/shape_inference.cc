#include "ir/shape_inference.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "common/check.h"

namespace quantkit::ir {
namespace {

using Dims = std::vector<Dim>;

// ---------------------------------------------------------------- operand access

// The tensor type of an input (following captures to the enclosing definition); null if unknown.
const TypeInfo* TypeOf(const Value* v) {
  if (v == nullptr) return nullptr;
  if (v->is_outer_scope()) {
    for (const Graph* g = v->owner()->parent(); g; g = g->parent()) {
      if (const Value* outer = g->FindValue(v->name())) {
        if (!outer->is_outer_scope()) return TypeOf(outer);
      }
    }
    return nullptr;
  }
  return v->type.kind == TypeInfo::Kind::kTensor ? &v->type : nullptr;
}

const Dims* ShapeOf(const Value* v) {
  const TypeInfo* t = TypeOf(v);
  return t && t->has_shape ? &t->dims : nullptr;
}

DType DTypeOf(const Value* v) {
  const TypeInfo* t = TypeOf(v);
  return t ? t->dtype : DType::kUndefined;
}

// The constant tensor behind a value: an initializer (not overridable) or a Constant node.
const Tensor* ConstTensor(const Value* v) {
  if (v == nullptr) return nullptr;
  if (v->initializer && !v->is_graph_input()) return &*v->initializer;
  const Node* p = v->producer();
  if (p && p->op_type() == "Constant" && p->domain().empty()) {
    const Attribute* a = p->attr("value");
    if (a && a->type == AttrType::kTensor) return &a->t;
  }
  return nullptr;
}

std::optional<std::vector<int64_t>> ConstInts(const Value* v) {
  if (v && v->producer() && v->producer()->op_type() == "Constant") {
    const Node* p = v->producer();
    if (const Attribute* a = p->attr("value_ints")) return a->ints;
    if (const Attribute* a = p->attr("value_int")) return std::vector<int64_t>{a->i};
  }
  const Tensor* t = ConstTensor(v);
  if (t == nullptr || (t->data() == nullptr && t->numel() != 0)) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  const auto* bytes = static_cast<const uint8_t*>(t->data());
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype() == DType::kInt64) {
      std::memcpy(&out[i], bytes + 8 * i, 8);
    } else if (t->dtype() == DType::kInt32) {
      int32_t x;
      std::memcpy(&x, bytes + 4 * i, 4);
      out[i] = x;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::vector<float>> ConstFloats(const Value* v) {
  const Tensor* t = ConstTensor(v);
  if (t == nullptr || t->dtype() != DType::kFloat) return std::nullopt;
  std::vector<float> out(static_cast<size_t>(t->numel()));
  if (!out.empty()) std::memcpy(out.data(), t->data(), out.size() * sizeof(float));
  return out;
}

int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

bool ValidAxis(int64_t axis, size_t rank) { return axis >= 0 && axis < static_cast<int64_t>(rank); }

// ---------------------------------------------------------------- dim arithmetic

Dim Known(int64_t v) { return Dim::Known(v); }
Dim Unknown() { return Dim{}; }

Dim Product(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (!dims[i].is_known()) return Unknown();
    p *= dims[i].value;
  }
  return Known(p);
}

// Output size of a sliding window (conv/pool) along one axis.
Dim WindowOut(const Dim& in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_sum,
              const std::string& auto_pad, bool ceil_mode) {
  if (!in.is_known() || stride <= 0) return Unknown();
  const int64_t effective = dilation * (kernel - 1) + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    return Known((in.value + stride - 1) / stride);
  }
  if (auto_pad == "VALID") {
    const int64_t span = in.value - effective;
    return span < 0 ? Unknown() : Known(span / stride + 1);
  }
  const int64_t span = in.value + pad_sum - effective;
  if (span < 0) return Unknown();
  return Known((ceil_mode ? (span + stride - 1) / stride : span / stride) + 1);
}

}  // namespace

bool BroadcastDims(const Dims& a, const Dims& b, Dims* out) {
  const size_t rank = std::max(a.size(), b.size());
  Dims result(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* x = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim* y = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    if (!x || (x->is_known() && x->value == 1)) {
      result[i] = y ? *y : Known(1);
    } else if (!y || (y->is_known() && y->value == 1)) {
      result[i] = *x;
    } else if (x->is_known() && y->is_known()) {
      if (x->value != y->value) return false;
      result[i] = *x;
    } else if (*x == *y) {
      result[i] = *x;  // same symbol
    } else if (x->is_known()) {
      result[i] = *x;  // a symbol broadcast against n > 1 must be n
    } else if (y->is_known()) {
      result[i] = *y;
    } else {
      result[i] = Unknown();
    }
  }
  *out = std::move(result);
  return true;
}

namespace {

// ---------------------------------------------------------------- op rules

// Each rule fills `out` (one TypeInfo per node output, kind kNone = unknown).
using Rule = std::function<void(const Node&, int64_t opset, std::vector<TypeInfo>& out)>;

TypeInfo MakeType(DType dtype, Dims dims) { return TypeInfo::Tensor(dtype, std::move(dims)); }
TypeInfo RankUnknown(DType dtype) {
  TypeInfo t;
  t.kind = TypeInfo::Kind::kTensor;
  t.dtype = dtype;
  return t;
}
// Type of `v` with its shape if known, else dtype only.
TypeInfo Like(const Value* v, std::optional<DType> dtype = std::nullopt) {
  const TypeInfo* t = TypeOf(v);
  if (t == nullptr) return TypeInfo{};
  TypeInfo r = *t;
  r.denotation.clear();
  if (dtype) r.dtype = *dtype;
  return r;
}

void SameAsInput0(const Node& n, int64_t, std::vector<TypeInfo>& out) { out[0] = Like(n.input(0)); }

void Broadcast(const Node& n, std::optional<DType> dtype, size_t first,
               std::vector<TypeInfo>& out) {
  DType dt = dtype ? *dtype : DTypeOf(n.input(first));
  Dims dims;
  bool first_shape = true;
  for (size_t i = first; i < n.num_inputs(); ++i) {
    const Dims* s = ShapeOf(n.input(i));
    if (!s) {
      out[0] = RankUnknown(dt);
      return;
    }
    if (first_shape) {
      dims = *s;
      first_shape = false;
    } else if (!BroadcastDims(dims, *s, &dims)) {
      out[0] = RankUnknown(dt);
      return;
    }
  }
  out[0] = MakeType(dt, dims);
}

void ConvLike(const Node& n, bool is_pool, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  if (!x || x->size() < 3) {
    out[0] = RankUnknown(dt);
    return;
  }
  const size_t spatial = x->size() - 2;
  std::vector<int64_t> kernel = n.GetInts("kernel_shape");
  Dim channels = (*x)[1];
  if (!is_pool) {
    const Dims* w = ShapeOf(n.input(1));
    if (w && w->size() == x->size()) {
      channels = (*w)[0];
      if (kernel.empty()) {
        for (size_t i = 2; i < w->size(); ++i) {
          if (!(*w)[i].is_known()) break;
          kernel.push_back((*w)[i].value);
        }
      }
    } else {
      channels = Unknown();
    }
  }
  if (kernel.size() != spatial) {
    out[0] = RankUnknown(dt);
    return;
  }
  const std::vector<int64_t> strides = n.GetInts("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> dilations = n.GetInts("dilations", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = n.GetInts("pads", std::vector<int64_t>(2 * spatial, 0));
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = n.GetInt("ceil_mode", 0) != 0;
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial) {
    out[0] = RankUnknown(dt);
    return;
  }
  Dims dims = {(*x)[0], channels};
  for (size_t i = 0; i < spatial; ++i) {
    dims.push_back(WindowOut((*x)[i + 2], kernel[i], strides[i], dilations[i],
                             pads[i] + pads[i + spatial], auto_pad, ceil_mode));
  }
  out[0] = MakeType(dt, dims);
  // MaxPool's optional second output holds int64 indices of the same shape.
  if (out.size() > 1) out[1] = MakeType(DType::kInt64, dims);
}

void ConvTranspose(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const Dims* w = ShapeOf(n.input(1));
  const DType dt = DTypeOf(n.input(0));
  if (!x || !w || x->size() < 3 || w->size() != x->size()) {
    out[0] = RankUnknown(dt);
    return;
  }
  const size_t spatial = x->size() - 2;
  const int64_t group = n.GetInt("group", 1);
  Dims dims = {(*x)[0], (*w)[1].is_known() ? Known((*w)[1].value * group) : Unknown()};
  const std::vector<int64_t> output_shape = n.GetInts("output_shape");
  if (output_shape.size() == spatial) {
    for (int64_t d : output_shape) dims.push_back(Known(d));
    out[0] = MakeType(dt, dims);
    return;
  }
  const std::vector<int64_t> strides = n.GetInts("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> dilations = n.GetInts("dilations", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = n.GetInts("pads", std::vector<int64_t>(2 * spatial, 0));
  const std::vector<int64_t> out_pad =
      n.GetInts("output_padding", std::vector<int64_t>(spatial, 0));
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial ||
      out_pad.size() != spatial) {
    out[0] = RankUnknown(dt);
    return;
  }
  for (size_t i = 0; i < spatial; ++i) {
    const Dim& in = (*x)[i + 2];
    const Dim& k = (*w)[i + 2];
    if (!in.is_known() || !k.is_known()) {
      dims.push_back(Unknown());
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      dims.push_back(Known(in.value * strides[i]));
    } else {
      const int64_t pad_sum = auto_pad == "VALID" ? 0 : pads[i] + pads[i + spatial];
      dims.push_back(Known(strides[i] * (in.value - 1) + out_pad[i] + (k.value - 1) * dilations[i] +
                           1 - pad_sum));
    }
  }
  out[0] = MakeType(dt, dims);
}

void Gemm(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* a = ShapeOf(n.input(0));
  const Dims* b = ShapeOf(n.input(1));
  const DType dt = DTypeOf(n.input(0));
  if (!a || !b || a->size() != 2 || b->size() != 2) {
    out[0] = RankUnknown(dt);
    return;
  }
  const Dim m = n.GetInt("transA", 0) ? (*a)[1] : (*a)[0];
  const Dim k = n.GetInt("transB", 0) ? (*b)[0] : (*b)[1];
  out[0] = MakeType(dt, {m, k});
}

void MatMul(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* a = ShapeOf(n.input(0));
  const Dims* b = ShapeOf(n.input(1));
  // MatMulInteger / QLinearMatMul produce int32 / the output zero-point type.
  DType dt = DTypeOf(n.input(0));
  if (n.op_type() == "MatMulInteger") dt = DType::kInt32;
  if (n.op_type() == "QLinearMatMul") dt = DTypeOf(n.input(7));
  if (n.op_type() == "QLinearMatMul") {
    b = ShapeOf(n.input(3));
  }
  if (!a || !b || a->empty() || b->empty()) {
    out[0] = RankUnknown(dt);
    return;
  }
  Dims x = *a;
  Dims y = *b;
  const bool a_vec = x.size() == 1;
  const bool b_vec = y.size() == 1;
  if (a_vec) x.insert(x.begin(), Known(1));
  if (b_vec) y.push_back(Known(1));
  Dims batch;
  if (!BroadcastDims(Dims(x.begin(), x.end() - 2), Dims(y.begin(), y.end() - 2), &batch)) {
    out[0] = RankUnknown(dt);
    return;
  }
  if (!a_vec) batch.push_back(x[x.size() - 2]);
  if (!b_vec) batch.push_back(y.back());
  out[0] = MakeType(dt, batch);
}

void Reshape(const Node& n, std::vector<TypeInfo>& out) {
  const DType dt = DTypeOf(n.input(0));
  auto shape =
      n.input(1) ? ConstInts(n.input(1)) : std::optional<std::vector<int64_t>>(n.GetInts("shape"));
  const Dims* x = ShapeOf(n.input(0));
  if (!shape) {
    out[0] = RankUnknown(dt);
    return;
  }
  const bool allow_zero = n.GetInt("allowzero", 0) != 0;
  Dims dims;
  int infer_at = -1;
  for (size_t i = 0; i < shape->size(); ++i) {
    const int64_t s = (*shape)[i];
    if (s == 0 && !allow_zero) {
      dims.push_back(x && i < x->size() ? (*x)[i] : Unknown());
    } else if (s == -1) {
      infer_at = static_cast<int>(i);
      dims.push_back(Unknown());
    } else {
      dims.push_back(Known(s));
    }
  }
  if (infer_at >= 0 && x) {
    const Dim total = Product(*x, 0, x->size());
    Dims others = dims;
    others.erase(others.begin() + infer_at);
    const Dim rest = Product(others, 0, others.size());
    if (total.is_known() && rest.is_known() && rest.value > 0) {
      dims[static_cast<size_t>(infer_at)] = Known(total.value / rest.value);
    } else if (x->size() == dims.size()) {
      // Common export pattern: Reshape(x, [0, -1]) style keeps a symbolic dim in place when the
      // other dims are copied; only safe when every other dim matches exactly.
      bool same = true;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (static_cast<int>(i) != infer_at && !(dims[i] == (*x)[i])) same = false;
      }
      if (same) dims[static_cast<size_t>(infer_at)] = (*x)[static_cast<size_t>(infer_at)];
    }
  }
  out[0] = MakeType(dt, dims);
}

void Transpose(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  if (!x) {
    out[0] = RankUnknown(dt);
    return;
  }
  std::vector<int64_t> perm = n.GetInts("perm");
  if (perm.empty()) {
    for (int64_t i = static_cast<int64_t>(x->size()) - 1; i >= 0; --i) perm.push_back(i);
  }
  if (perm.size() != x->size()) {
    out[0] = RankUnknown(dt);
    return;
  }
  Dims dims;
  for (int64_t p : perm) {
    p = NormalizeAxis(p, x->size());
    if (!ValidAxis(p, x->size())) {
      out[0] = RankUnknown(dt);
      return;
    }
    dims.push_back((*x)[static_cast<size_t>(p)]);
  }
  out[0] = MakeType(dt, dims);
}

void Flatten(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  if (!x) {
    out[0] = RankUnknown(dt);
    return;
  }
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 1), x->size());
  if (axis < 0 || axis > static_cast<int64_t>(x->size())) {
    out[0] = RankUnknown(dt);
    return;
  }
  const auto a = static_cast<size_t>(axis);
  Dim first = Product(*x, 0, a);
  if (a == 1) first = (*x)[0];  // keeps a symbolic batch dim
  Dim second = Product(*x, a, x->size());
  if (a + 1 == x->size()) second = (*x)[a];
  out[0] = MakeType(dt, {first, second});
}

void Concat(const Node& n, std::vector<TypeInfo>& out) {
  const DType dt = DTypeOf(n.input(0));
  const Dims* first = ShapeOf(n.input(0));
  if (!first) {
    out[0] = RankUnknown(dt);
    return;
  }
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), first->size());
  if (!ValidAxis(axis, first->size())) {
    out[0] = RankUnknown(dt);
    return;
  }
  Dims dims = *first;
  const auto a = static_cast<size_t>(axis);
  int64_t sum = 0;
  bool known = true;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Dims* s = ShapeOf(n.input(i));
    if (!s || s->size() != first->size()) {
      out[0] = RankUnknown(dt);
      return;
    }
    if ((*s)[a].is_known()) {
      sum += (*s)[a].value;
    } else {
      known = false;
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (d != a && !dims[d].is_known() && (*s)[d].is_known()) dims[d] = (*s)[d];
    }
  }
  dims[a] = known ? Known(sum) : Unknown();
  out[0] = MakeType(dt, dims);
}

void Split(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  for (auto& o : out) o = RankUnknown(dt);
  if (!x) return;
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), x->size());
  if (!ValidAxis(axis, x->size())) return;
  const auto a = static_cast<size_t>(axis);
  std::optional<std::vector<int64_t>> split = std::vector<int64_t>{};
  if (opset >= 13 && n.input(1)) {
    split = ConstInts(n.input(1));
    if (!split) return;  // sizes computed at run time
  } else if (opset < 13) {
    split = n.GetInts("split");
  }
  if (split->empty()) {
    if (!(*x)[a].is_known()) return;
    const auto parts = static_cast<int64_t>(out.size());
    const int64_t size = (*x)[a].value;
    const int64_t chunk = (size + parts - 1) / parts;  // opset 18: last chunk may be smaller
    split = std::vector<int64_t>();
    for (int64_t i = 0; i < parts; ++i) split->push_back(std::min(chunk, size - i * chunk));
  }
  if (split->size() != out.size()) return;
  for (size_t i = 0; i < out.size(); ++i) {
    Dims dims = *x;
    dims[a] = Known((*split)[i]);
    out[i] = MakeType(dt, dims);
  }
}

void Slice(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  out[0] = RankUnknown(dt);
  if (!x) return;
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (opset < 10) {
    starts = n.GetInts("starts");
    ends = n.GetInts("ends");
    axes = n.GetInts("axes");
  } else {
    starts = ConstInts(n.input(1));
    ends = ConstInts(n.input(2));
    axes = n.input(3) ? ConstInts(n.input(3))
                      : std::optional<std::vector<int64_t>>(std::vector<int64_t>{});
    steps = n.input(4) ? ConstInts(n.input(4))
                       : std::optional<std::vector<int64_t>>(std::vector<int64_t>{});
  }
  if (!starts || !ends || !axes || starts->size() != ends->size()) return;
  if (axes->empty()) {
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps || steps->empty()) steps = std::vector<int64_t>(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size()) return;
  Dims dims = *x;
  for (size_t i = 0; i < starts->size(); ++i) {
    const int64_t axis = NormalizeAxis((*axes)[i], x->size());
    if (!ValidAxis(axis, x->size())) return;
    Dim& d = dims[static_cast<size_t>(axis)];
    const int64_t step = (*steps)[i];
    if (!d.is_known() || step == 0) {
      d = Unknown();
      continue;
    }
    // Clamp as the ONNX reference does, then count the visited indices.
    const int64_t size = d.value;
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); };
    int64_t s = (*starts)[i] < 0 ? (*starts)[i] + size : (*starts)[i];
    int64_t e = (*ends)[i] < 0 ? (*ends)[i] + size : (*ends)[i];
    if (step > 0) {
      s = clamp(s, 0, size);
      e = clamp(e, 0, size);
      d = Known(e > s ? (e - s + step - 1) / step : 0);
    } else {
      s = clamp(s, 0, size - 1);
      e = clamp(e, -1, size - 1);
      d = Known(s > e ? (s - e - step - 1) / -step : 0);
    }
  }
  out[0] = MakeType(dt, dims);
}

void Squeeze(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  out[0] = RankUnknown(dt);
  if (!x) return;
  auto axes = opset >= 13
                  ? (n.input(1) ? ConstInts(n.input(1))
                                : std::optional<std::vector<int64_t>>(std::vector<int64_t>{}))
                  : std::optional<std::vector<int64_t>>(n.GetInts("axes"));
  if (!axes) return;
  std::set<int64_t> drop;
  for (int64_t a : *axes) drop.insert(NormalizeAxis(a, x->size()));
  Dims dims;
  for (size_t i = 0; i < x->size(); ++i) {
    const bool squeeze = axes->empty() ? ((*x)[i].is_known() && (*x)[i].value == 1)
                                       : drop.count(static_cast<int64_t>(i)) > 0;
    if (axes->empty() && !(*x)[i].is_known()) return;  // cannot tell whether it is 1
    if (!squeeze) dims.push_back((*x)[i]);
  }
  out[0] = MakeType(dt, dims);
}

void Unsqueeze(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  out[0] = RankUnknown(dt);
  auto axes =
      opset >= 13 ? ConstInts(n.input(1)) : std::optional<std::vector<int64_t>>(n.GetInts("axes"));
  if (!x || !axes) return;
  const size_t rank = x->size() + axes->size();
  std::set<int64_t> insert;
  for (int64_t a : *axes) insert.insert(NormalizeAxis(a, rank));
  Dims dims;
  size_t src = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (insert.count(static_cast<int64_t>(i))) {
      dims.push_back(Known(1));
    } else if (src < x->size()) {
      dims.push_back((*x)[src++]);
    } else {
      return;
    }
  }
  out[0] = MakeType(dt, dims);
}

void Gather(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const Dims* idx = ShapeOf(n.input(1));
  const DType dt = DTypeOf(n.input(0));
  out[0] = RankUnknown(dt);
  if (!x || !idx) return;
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), x->size());
  if (!ValidAxis(axis, x->size())) return;
  const auto a = static_cast<size_t>(axis);
  Dims dims(x->begin(), x->begin() + static_cast<std::ptrdiff_t>(a));
  dims.insert(dims.end(), idx->begin(), idx->end());
  dims.insert(dims.end(), x->begin() + static_cast<std::ptrdiff_t>(a) + 1, x->end());
  out[0] = MakeType(dt, dims);
}

void Reduce(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  DType dt = DTypeOf(n.input(0));
  const bool arg = n.op_type() == "ArgMax" || n.op_type() == "ArgMin";
  if (arg) dt = DType::kInt64;
  out[0] = RankUnknown(dt);
  if (!x) return;
  const bool keep = n.GetInt("keepdims", 1) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (arg) {
    axes = std::vector<int64_t>{n.GetInt("axis", 0)};
  } else if (n.has_attr("axes")) {
    axes = n.GetInts("axes");
  } else if (n.input(1)) {
    axes = ConstInts(n.input(1));
  } else {
    axes = std::vector<int64_t>{};
  }
  if (!axes) return;
  const bool noop = axes->empty() && n.GetInt("noop_with_empty_axes", 0) != 0;
  if (noop) {
    out[0] = Like(n.input(0));
    return;
  }
  std::set<int64_t> reduce;
  for (int64_t a : *axes) reduce.insert(NormalizeAxis(a, x->size()));
  Dims dims;
  for (size_t i = 0; i < x->size(); ++i) {
    const bool r = axes->empty() || reduce.count(static_cast<int64_t>(i));
    if (!r) {
      dims.push_back((*x)[i]);
    } else if (keep) {
      dims.push_back(Known(1));
    }
  }
  out[0] = MakeType(dt, dims);
}

void Resize(const Node& n, int64_t opset, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  const DType dt = DTypeOf(n.input(0));
  out[0] = RankUnknown(dt);
  if (!x) return;
  // Upsample-7 has scales as an attribute; Resize-10 (x, scales); Resize-11+ (x, roi, scales,
  // sizes).
  const Value* scales_v = n.op_type() == "Upsample" || opset < 11 ? n.input(1) : n.input(2);
  const Value* sizes_v = n.op_type() == "Resize" && opset >= 11 ? n.input(3) : nullptr;
  std::optional<std::vector<float>> scales;
  if (n.has_attr("scales")) scales = n.GetFloats("scales");
  if (!scales && scales_v) scales = ConstFloats(scales_v);
  auto sizes = sizes_v ? ConstInts(sizes_v) : std::nullopt;
  if (n.has_attr("axes")) return;  // opset-18 partial axes: not handled
  Dims dims;
  if (sizes && sizes->size() == x->size()) {
    for (int64_t s : *sizes) dims.push_back(Known(s));
  } else if (scales && scales->size() == x->size()) {
    for (size_t i = 0; i < x->size(); ++i) {
      const Dim& d = (*x)[i];
      if ((*scales)[i] == 1.0f) {
        dims.push_back(d);
      } else {
        dims.push_back(
            d.is_known() ? Known(static_cast<int64_t>(static_cast<double>(d.value) * (*scales)[i]))
                         : Unknown());
      }
    }
  } else {
    return;
  }
  out[0] = MakeType(dt, dims);
}

void Shape(const Node& n, std::vector<TypeInfo>& out) {
  const Dims* x = ShapeOf(n.input(0));
  out[0] = RankUnknown(DType::kInt64);
  if (!x) return;
  const auto rank = static_cast<int64_t>(x->size());
  auto clamp = [rank](int64_t v) {
    return std::max<int64_t>(0, std::min(v < 0 ? v + rank : v, rank));
  };
  const int64_t start = clamp(n.GetInt("start", 0));
  const int64_t end = clamp(n.GetInt("end", rank));
  out[0] = MakeType(DType::kInt64, {Known(std::max<int64_t>(0, end - start))});
}

// RNN, GRU, LSTM: Y is [seq, directions, batch, hidden] ([batch, seq, directions, hidden] with
// layout 1); Y_h and LSTM's Y_c are [directions, batch, hidden] ([batch, directions, hidden]).
void Recurrent(const Node& n, std::vector<TypeInfo>& out) {
  const DType dt = DTypeOf(n.input(0));
  if (dt == DType::kUndefined) return;
  for (TypeInfo& o : out) o = RankUnknown(dt);
  const Dims* x = ShapeOf(n.input(0));
  const int64_t hidden = n.GetInt("hidden_size", 0);
  if (x == nullptr || x->size() != 3 || hidden <= 0) return;
  const bool batch_first = n.GetInt("layout", 0) == 1;
  const Dim seq = (*x)[batch_first ? 1 : 0];
  const Dim batch = (*x)[batch_first ? 0 : 1];
  const Dim dirs = Known(n.GetString("direction", "forward") == "bidirectional" ? 2 : 1);
  const Dim h = Known(hidden);
  out[0] = MakeType(dt, batch_first ? Dims{batch, seq, dirs, h} : Dims{seq, dirs, batch, h});
  for (size_t i = 1; i < out.size(); ++i) {
    out[i] = MakeType(dt, batch_first ? Dims{batch, dirs, h} : Dims{dirs, batch, h});
  }
}

// If: each output as both branches declare or infer it (the branches are inferred first); the
// shape only where the two agree, the dtype where they do (a disagreement is left unknown).
void If(const Node& n, std::vector<TypeInfo>& out) {
  const Attribute* then_branch = n.attr("then_branch");
  const Attribute* else_branch = n.attr("else_branch");
  if (!then_branch || !else_branch || then_branch->graphs.empty() || else_branch->graphs.empty())
    return;
  const std::vector<Value*>& a = then_branch->graphs[0]->outputs();
  const std::vector<Value*>& b = else_branch->graphs[0]->outputs();
  for (size_t i = 0; i < out.size() && i < a.size() && i < b.size(); ++i) {
    const TypeInfo* ta = TypeOf(a[i]);
    const TypeInfo* tb = TypeOf(b[i]);
    if (!ta || !tb || ta->dtype == DType::kUndefined || ta->dtype != tb->dtype) continue;
    const bool same_shape = ta->has_shape && tb->has_shape && ta->ToString() == tb->ToString();
    out[i] = same_shape ? MakeType(ta->dtype, ta->dims) : RankUnknown(ta->dtype);
  }
}

DType QuantizedType(const Node& n) {
  if (const Attribute* a = n.attr("output_dtype")) return static_cast<DType>(a->i);
  const DType zp = DTypeOf(n.input(2));
  return zp == DType::kUndefined ? DType::kUint8 : zp;
}

// The table: op type (default domain) -> rule. To add an op, add a row; opset-dependent
// operand positions are handled inside the rule (see Split, Squeeze, Slice, Resize).
const std::unordered_map<std::string, Rule>& Rules() {
  static const auto* rules = [] {
    auto* r = new std::unordered_map<std::string, Rule>();
    for (const char* op : {"Relu",
                           "LeakyRelu",
                           "PRelu",
                           "Sigmoid",
                           "Tanh",
                           "Clip",
                           "Elu",
                           "Selu",
                           "HardSigmoid",
                           "HardSwish",
                           "Softplus",
                           "Softsign",
                           "Gelu",
                           "Mish",
                           "Erf",
                           "Exp",
                           "Log",
                           "Sqrt",
                           "Neg",
                           "Abs",
                           "Reciprocal",
                           "Floor",
                           "Ceil",
                           "Round",
                           "Sign",
                           "Sin",
                           "Cos",
                           "Identity",
                           "Softmax",
                           "LogSoftmax",
                           "Hardmax",
                           "BatchNormalization",
                           "InstanceNormalization",
                           "LayerNormalization",
                           "GroupNormalization",
                           "LRN",
                           "Dropout",
                           "Celu",
                           "ThresholdedRelu",
                           "CumSum",
                           "Not",
                           "MeanVarianceNormalization"}) {
      (*r)[op] = SameAsInput0;
    }
    for (const char* op :
         {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Mod", "BitShift"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
        Broadcast(n, std::nullopt, 0, out);
      };
    }
    for (const char* op :
         {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
        Broadcast(n, DType::kBool, 0, out);
      };
    }
    for (const char* op : {"IsNaN", "IsInf"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
        out[0] = Like(n.input(0), DType::kBool);
      };
    }
    (*r)["Where"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      Broadcast(n, DTypeOf(n.input(1)), 0, out);
    };
    (*r)["Conv"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      ConvLike(n, false, out);
    };
    for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { ConvLike(n, true, out); };
    }
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
        const Dims* x = ShapeOf(n.input(0));
        if (!x || x->size() < 2) {
          out[0] = RankUnknown(DTypeOf(n.input(0)));
          return;
        }
        Dims dims = {(*x)[0], (*x)[1]};
        dims.resize(x->size(), Known(1));
        out[0] = MakeType(DTypeOf(n.input(0)), dims);
      };
    }
    (*r)["ConvTranspose"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      ConvTranspose(n, out);
    };
    (*r)["Gemm"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Gemm(n, out); };
    for (const char* op : {"MatMul", "MatMulInteger", "QLinearMatMul"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { MatMul(n, out); };
    }
    (*r)["Reshape"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Reshape(n, out); };
    (*r)["Transpose"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      Transpose(n, out);
    };
    (*r)["Flatten"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Flatten(n, out); };
    (*r)["Concat"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Concat(n, out); };
    (*r)["Split"] = Split;
    (*r)["Slice"] = Slice;
    (*r)["Squeeze"] = Squeeze;
    (*r)["Unsqueeze"] = Unsqueeze;
    (*r)["Gather"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Gather(n, out); };
    for (const char* op :
         {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"}) {
      (*r)[op] = Reduce;
    }
    for (const char* op : {"RNN", "GRU", "LSTM"}) {
      (*r)[op] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Recurrent(n, out); };
    }
    (*r)["If"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { If(n, out); };
    (*r)["Resize"] = Resize;
    (*r)["Upsample"] = Resize;
    (*r)["Shape"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) { Shape(n, out); };
    (*r)["Size"] = [](const Node&, int64_t, std::vector<TypeInfo>& out) {
      out[0] = MakeType(DType::kInt64, {});
    };
    (*r)["Cast"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      const int64_t to = n.GetInt("to", 0);
      if (IsKnownDType(static_cast<int32_t>(to))) out[0] = Like(n.input(0), static_cast<DType>(to));
    };
    (*r)["CastLike"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      out[0] = Like(n.input(0), DTypeOf(n.input(1)));
    };
    (*r)["QuantizeLinear"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      out[0] = Like(n.input(0), QuantizedType(n));
    };
    (*r)["DequantizeLinear"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      const DType scale = DTypeOf(n.input(1));
      out[0] = Like(n.input(0), scale == DType::kUndefined ? DType::kFloat : scale);
    };
    (*r)["DynamicQuantizeLinear"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      out[0] = Like(n.input(0), DType::kUint8);
      if (out.size() > 2) {
        out[1] = MakeType(DType::kFloat, {});
        out[2] = MakeType(DType::kUint8, {});
      }
    };
    (*r)["Constant"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      const Attribute* a = n.attributes().empty() ? nullptr : &n.attributes().front();
      if (!a) return;
      Dims dims;
      if (a->type == AttrType::kTensor) {
        for (int64_t d : a->t.dims()) dims.push_back(Known(d));
        out[0] = MakeType(a->t.dtype(), dims);
      } else if (a->name == "value_float") {
        out[0] = MakeType(DType::kFloat, {});
      } else if (a->name == "value_int") {
        out[0] = MakeType(DType::kInt64, {});
      } else if (a->name == "value_floats") {
        out[0] = MakeType(DType::kFloat, {Known(static_cast<int64_t>(a->floats.size()))});
      } else if (a->name == "value_ints") {
        out[0] = MakeType(DType::kInt64, {Known(static_cast<int64_t>(a->ints.size()))});
      }
    };
    (*r)["ConstantOfShape"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      const Attribute* a = n.attr("value");
      const DType dt = a && a->type == AttrType::kTensor ? a->t.dtype() : DType::kFloat;
      auto shape = ConstInts(n.input(0));
      if (!shape) {
        out[0] = RankUnknown(dt);
        return;
      }
      Dims dims;
      for (int64_t d : *shape) dims.push_back(Known(d));
      out[0] = MakeType(dt, dims);
    };
    (*r)["Expand"] = [](const Node& n, int64_t, std::vector<TypeInfo>& out) {
      const Dims* x = ShapeOf(n.input(0));
      auto shape = ConstInts(n.input(1));
      const DType dt = DTypeOf(n.input(0));
      out[0] = RankUnknown(dt);
      if (!x || !shape) return;
      Dims target;
      for (int64_t d : *shape) target.push_back(Known(d));
      Dims dims;
      if (BroadcastDims(*x, target, &dims)) out[0] = MakeType(dt, dims);
    };
    return r;
  }();
  return *rules;
}

bool HasDeclaredShape(const Value* v) {
  return v->type.kind != TypeInfo::Kind::kNone && (v->has_value_info || v->is_graph_output());
}

Status InferGraph(Graph& graph, int64_t opset, ShapeInferenceStats* stats) {
  QK_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());
  const auto& rules = Rules();
  for (Node* node : order) {
    // Bodies first: If's outputs are typed from its branches' outputs.
    for (Attribute& a : node->attributes()) {
      for (auto& sub : a.graphs) QK_RETURN_IF_ERROR(InferGraph(*sub, opset, stats));
    }
    if (node->domain().empty()) {
      auto it = rules.find(node->op_type());
      std::vector<TypeInfo> out(node->num_outputs());
      if (it != rules.end()) it->second(*node, opset, out);
      for (size_t i = 0; i < node->num_outputs(); ++i) {
        Value* v = node->output(i);
        if (v == nullptr) continue;
        if (HasDeclaredShape(v)) {
          ++stats->declared;
        } else if (out[i].kind != TypeInfo::Kind::kNone && out[i].dtype != DType::kUndefined) {
          v->type = std::move(out[i]);
          ++stats->inferred;
        } else {
          ++stats->unknown;
        }
      }
    } else {
      for (Value* v : node->outputs()) {
        if (v) ++(HasDeclaredShape(v) ? stats->declared : stats->unknown);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status InferShapes(Graph& graph, int64_t opset, ShapeInferenceStats* stats) {
  ShapeInferenceStats local;
  QK_RETURN_IF_ERROR(InferGraph(graph, opset, stats ? stats : &local));
  return Status::Ok();
}

Status InferShapes(Model& model, ShapeInferenceStats* stats) {
  return InferShapes(*model.graph, model.OpsetFor(""), stats);
}

}  // namespace quantkit::ir
