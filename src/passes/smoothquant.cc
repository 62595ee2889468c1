#include "passes/smoothquant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "common/check.h"

namespace quantkit::passes {
namespace {

// Channel layouts: X's channel axis as a consumer or producer has it. Rank-2 tensors (Gemm) have
// both at once.
constexpr int64_t kAxisOne = 1, kAxisLast = -1, kAxisEither = 0;

bool AxesAgree(int64_t a, int64_t b) { return a == b || a == kAxisEither || b == kAxisEither; }

// A float initializer read by this node only (so changing it changes nothing else).
const ir::Value* OwnInitializer(const ir::Node* node, size_t index) {
  const ir::Value* v = node->input(index);
  if (v == nullptr || !v->initializer || v->is_graph_input() ||
      v->initializer->dtype() != ir::DType::kFloat) {
    return nullptr;
  }
  return v->uses().size() == 1 ? v : nullptr;
}

// A consumer layer: its weight, the weight's input-channel axis, X's channel axis, the channels;
// or why not.
struct Consumer {
  AxisEdit weight;
  int64_t x_axis = kAxisLast;
  int64_t channels = 0;
};

Result<Consumer> ConsumerOf(const ir::Node* n, int input_index, const quant::QuantPlan& plan) {
  const std::string& op = n->op_type();
  if (!n->domain().empty() || (op != "MatMul" && op != "Gemm" && op != "Conv")) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("it also feeds {}, which cannot take the scale", n->Describe()));
  }
  if (input_index != 0)
    return Status(StatusCode::kUnsupported,
                  fmt::format("it is not {}'s data input", n->Describe()));
  const ir::Value* w = OwnInitializer(n, 1);
  if (w == nullptr) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}'s weight is not a float initializer of its own", n->Describe()));
  }
  const quant::TensorQuant* entry = plan.Find(w->name());
  if (entry == nullptr || !entry->quantized) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}'s weight is not quantized", n->Describe()));
  }
  const std::vector<int64_t>& d = w->initializer->dims();
  Consumer c;
  c.weight.initializer = w->name();
  if (op == "MatMul") {
    if (d.size() != 2)
      return Status(StatusCode::kUnsupported, fmt::format("{}'s weight is not 2-D", n->Describe()));
    c.weight.axis = 0;
    c.channels = d[0];
  } else if (op == "Gemm") {
    if (d.size() != 2 || n->GetInt("transA", 0) != 0) {
      return Status(StatusCode::kUnsupported,
                    fmt::format("{} with transA or a weight that is not 2-D", n->Describe()));
    }
    c.weight.axis = n->GetInt("transB", 0) != 0 ? 1 : 0;
    c.channels = d[static_cast<size_t>(c.weight.axis)];
    c.x_axis = kAxisEither;
  } else {
    const int64_t group = n->GetInt("group", 1);
    if (d.size() < 3)
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}'s weight is not a kernel", n->Describe()));
    if (group == 1) {
      c.weight.axis = 1;
      c.channels = d[1];
    } else if (d[1] == 1 && d[0] == group) {
      // Depthwise: input channel j is read by kernel j alone, so diag(s) scales the kernels (axis
      // 0), which per-channel weight scales absorb exactly: X is flattened at no cost to W.
      c.weight.axis = 0;
      c.channels = group;
    } else {
      return Status(StatusCode::kUnsupported,
                    fmt::format("{} is grouped, not depthwise (input channels do not map to rows)",
                                n->Describe()));
    }
    c.x_axis = kAxisOne;
  }
  return c;
}

// Ops with f(x / s) = f(x) / s per channel for s > 0, on their first input.
bool PositivelyHomogeneous(const ir::Node* n) {
  static const std::set<std::string> ops{"Relu", "LeakyRelu", "PRelu", "MaxPool", "Identity"};
  if (!n->domain().empty() || ops.count(n->op_type()) == 0) return false;
  return n->op_type() != "MaxPool" || n->num_outputs() == 1 || n->output(1) == nullptr;
}

bool OnlyFirstOutputUsed(const ir::Node* n) {
  for (size_t i = 1; i < n->num_outputs(); ++i) {
    if (n->output(i) != nullptr &&
        (!n->output(i)->uses().empty() || n->output(i)->is_graph_output()))
      return false;
  }
  return true;
}

// X's layout as its layers read it: the channel axis (kAxisOne, kAxisLast or kAxisEither) and rank.
struct Layout {
  int64_t axis = kAxisEither;
  int64_t rank = -1;  // unknown
  // The channel axis counted from the front.
  int64_t Front() const { return axis == kAxisOne ? 1 : rank - 1; }
};

// The node 1/s folds into for value `v`: its producer, back over positively homogeneous ops
// that each feed only the next; or why none.
Result<const ir::Node*> FoldTarget(const ir::Value* v) {
  const ir::Node* p = v->producer();
  while (p != nullptr && PositivelyHomogeneous(p)) {
    v = p->input(0);
    if (v == nullptr || v->uses().size() != 1 || v->is_graph_output()) {
      return Status(StatusCode::kUnsupported,
                    fmt::format("the input of {} feeds other nodes too", p->Describe()));
    }
    p = v->producer();
  }
  if (p == nullptr)
    return Status(StatusCode::kUnsupported, "its input comes from a graph input or initializer");
  return p;
}

// An affine's constant operand `v` as one value per channel of a tensor laid out as `x`: a single
// value (expanded to [C, 1, ...] up to the channel axis), or already [.., C, 1, ...] with C on the
// channel axis counted from the back. std::nullopt when it is neither.
std::optional<AxisEdit> PerChannelConstant(const ir::Value* v, int64_t channels, const Layout& x) {
  const std::vector<int64_t>& d = v->initializer->dims();
  const int64_t trailing = x.rank - 1 - x.Front();  // the 1s after the channel axis
  std::vector<int64_t> per_channel{channels};
  per_channel.insert(per_channel.end(), static_cast<size_t>(trailing), 1);
  if (v->initializer->numel() == 1) {
    if (static_cast<int64_t>(d.size()) > x.rank)
      return std::nullopt;  // would raise the output's rank
    return AxisEdit{v->name(), 0, per_channel};
  }
  const int64_t rank = static_cast<int64_t>(d.size());
  if (rank < trailing + 1 || rank > x.rank) return std::nullopt;
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t want = k == rank - 1 - trailing ? channels : 1;
    if (d[static_cast<size_t>(k)] != want) return std::nullopt;
  }
  return AxisEdit{v->name(), rank - 1 - trailing, {}};
}

// The producer's per-channel initializers 1/s divides, its output's channel axis; or why not.
Result<std::vector<AxisEdit>> FoldsOf(const ir::Node* p, int64_t channels, const Layout& x,
                                      int64_t* axis) {
  const std::string& op = p->op_type();
  auto cannot = [&](const std::string& why) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("1/s cannot be folded into {}: {}", p->Describe(), why));
  };
  if (!p->domain().empty()) return cannot("not an ONNX op");
  if (!OnlyFirstOutputUsed(p)) return cannot("its other outputs are used");
  // Per-channel vectors: [channels] initializers of this node alone.
  auto vector_at = [&](size_t index, bool optional, std::vector<AxisEdit>* out) -> bool {
    if (p->input(index) == nullptr) return optional;
    const ir::Value* v = OwnInitializer(p, index);
    if (v == nullptr || v->initializer->dims() != std::vector<int64_t>{channels}) return false;
    out->push_back({v->name(), 0, {}});
    return true;
  };
  std::vector<AxisEdit> folds;
  if (op == "LayerNormalization" || op == "BatchNormalization") {
    const bool ln = op == "LayerNormalization";
    // LayerNormalization's scale of shape [C] normalizes over the last axis alone.
    *axis = ln ? kAxisLast : kAxisOne;
    if (!vector_at(1, false, &folds) || !vector_at(2, ln, &folds)) {
      return cannot(fmt::format(
          "its scale and bias are not float initializers of its own with {} values", channels));
    }
    if (!ln && p->GetInt("training_mode", 0) != 0) return cannot("training mode");
    return folds;
  }
  if (op == "Conv" || op == "Gemm" || op == "MatMul") {
    const ir::Value* w = OwnInitializer(p, 1);
    if (w == nullptr) return cannot("its weight is not a float initializer of its own");
    const std::vector<int64_t>& d = w->initializer->dims();
    int64_t out_axis = 0;
    if (op == "Conv") {
      *axis = kAxisOne;
    } else if (op == "Gemm") {
      if (d.size() != 2) return cannot("its weight is not 2-D");
      out_axis = p->GetInt("transB", 0) != 0 ? 0 : 1;
      *axis = kAxisEither;
    } else {
      if (d.size() != 2) return cannot("its weight is not 2-D");
      out_axis = 1;
      *axis = kAxisLast;
    }
    if (d.empty() || d[static_cast<size_t>(out_axis)] != channels)
      return cannot("its output channels differ");
    folds.push_back({w->name(), out_axis, {}});
    if (op != "MatMul" && !vector_at(2, true, &folds))
      return cannot("its bias is not one value per output channel");
    return folds;
  }
  if (op == "Mul" || op == "Add") {
    // (h * a) / s = h * (a / s); (y + b) / s = y / s + b / s, y's producer folded the same way.
    if (x.rank < 1) return cannot("the rank of its output is unknown");
    const bool first = OwnInitializer(p, 0) != nullptr, second = OwnInitializer(p, 1) != nullptr;
    if (first == second)
      return cannot("not one float initializer operand of its own and one activation");
    const size_t constant = first ? 0 : 1;
    const std::optional<AxisEdit> edit = PerChannelConstant(p->input(constant), channels, x);
    if (!edit)
      return cannot(
          fmt::format("its constant holds neither one value nor one per channel ({})", channels));
    folds.push_back(*edit);
    *axis = x.axis;
    if (op == "Mul") return folds;
    const ir::Value* y = p->input(1 - constant);
    if (y->uses().size() != 1 || y->is_graph_output())
      return cannot("its activation operand feeds other nodes too");
    Result<const ir::Node*> inner = FoldTarget(y);
    if (!inner.ok()) return cannot(std::string(inner.status().message()));
    int64_t inner_axis = kAxisEither;
    QK_ASSIGN_OR_RETURN(std::vector<AxisEdit> more, FoldsOf(*inner, channels, x, &inner_axis));
    if (!AxesAgree(x.axis, inner_axis))
      return cannot(fmt::format("{} has its channels on another axis", (*inner)->Describe()));
    folds.insert(folds.end(), more.begin(), more.end());
    return folds;
  }
  return cannot(
      "not LayerNormalization, BatchNormalization, Conv, Gemm or MatMul, an affine Mul / Add with a "
      "constant, nor a positively homogeneous op (Relu, LeakyRelu, PRelu, MaxPool, Identity) before one");
}

// X's group, or why none.
Result<SmoothGroup> GroupOf(const ir::Value* x, const quant::QuantPlan& plan) {
  SmoothGroup g;
  g.activation = x->name();
  const quant::TensorQuant* entry = plan.Find(x->name());
  if (entry == nullptr || !entry->quantized)
    return Status(StatusCode::kUnsupported, "its input is not quantized");
  if (x->is_graph_output() || x->is_graph_input()) {
    return Status(StatusCode::kUnsupported, "its input is a graph input or output");
  }
  int64_t axis = kAxisEither;
  for (const ir::Use& u : x->uses()) {
    if (u.node->op_type() == "Shape" && u.node->domain().empty()) continue;  // values do not matter
    QK_ASSIGN_OR_RETURN(Consumer c, ConsumerOf(u.node, u.input_index, plan));
    if (g.channels != 0 && c.channels != g.channels)
      return Status(StatusCode::kUnsupported, "input channels differ");
    if (!AxesAgree(axis, c.x_axis))
      return Status(StatusCode::kUnsupported, "its layers read channels on different axes");
    if (axis == kAxisEither) axis = c.x_axis;
    g.channels = c.channels;
    g.layers.push_back(u.node->name.empty() ? u.node->output(0)->name() : u.node->name);
    g.weights.push_back(c.weight);
  }
  QK_ASSIGN_OR_RETURN(const ir::Node* p, FoldTarget(x));
  Layout layout;
  layout.axis = axis;
  if (const auto dims = x->type.ConcreteDims()) layout.rank = static_cast<int64_t>(dims->size());
  int64_t producer_axis = kAxisEither;
  QK_ASSIGN_OR_RETURN(g.folds, FoldsOf(p, g.channels, layout, &producer_axis));
  if (!AxesAgree(axis, producer_axis)) {
    const auto dims = x->type.ConcreteDims();
    if (!dims || dims->size() != 2) {
      return Status(
          StatusCode::kUnsupported,
          fmt::format("{} has its channels on another axis than the layers read", p->Describe()));
    }
  }
  g.channel_axis = axis == kAxisEither ? producer_axis : axis;
  if (g.channel_axis == kAxisEither) g.channel_axis = kAxisLast;
  g.producer = p->Describe();
  return g;
}

// The slice index of each element along `axis` of `dims`: (i / inner) % dims[axis].
struct AxisWalk {
  int64_t inner = 1, size = 1;
  AxisWalk(const std::vector<int64_t>& dims, int64_t axis) {
    const int64_t rank = static_cast<int64_t>(dims.size());
    const int64_t a = axis < 0 ? axis + rank : axis;
    size = dims.at(static_cast<size_t>(a));
    for (int64_t k = a + 1; k < rank; ++k) inner *= dims[static_cast<size_t>(k)];
  }
  int64_t Channel(int64_t i) const { return (i / inner) % size; }
};

}  // namespace

Result<std::vector<SmoothGroup>> FindSmoothGroups(const ir::Model& model,
                                                  const quant::QuantPlan& plan,
                                                  std::vector<SmoothSkip>* skipped) {
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, model.graph->TopologicalOrder());
  std::vector<SmoothGroup> groups;
  std::set<const ir::Value*> seen;
  for (const ir::Node* n : order) {
    const std::string& op = n->op_type();
    if (!n->domain().empty() || (op != "MatMul" && op != "Gemm" && op != "Conv") ||
        n->input(0) == nullptr)
      continue;
    const ir::Value* w = n->input(1);
    if (w == nullptr || !w->initializer)
      continue;  // two activations (attention's MatMuls): no weight
    const quant::TensorQuant* entry = plan.Find(w->name());
    if (entry == nullptr || !entry->quantized)
      continue;  // not a quantized layer: nothing to smooth
    if (!seen.insert(n->input(0)).second) continue;
    Result<SmoothGroup> g = GroupOf(n->input(0), plan);
    if (g.ok()) {
      groups.push_back(std::move(*g));
    } else if (skipped) {
      skipped->push_back({n->name.empty() ? n->output(0)->name() : n->name, g.status().message()});
    }
  }
  return groups;
}

std::vector<float> SmoothingScales(const std::vector<float>& act_max,
                                   const std::vector<float>& weight_max, double alpha) {
  std::vector<float> s(act_max.size(), 1.0f);
  for (size_t j = 0; j < s.size() && j < weight_max.size(); ++j) {
    if (!(act_max[j] > 0) || !(weight_max[j] > 0)) continue;
    const double v = std::pow(static_cast<double>(act_max[j]), alpha) /
                     std::pow(static_cast<double>(weight_max[j]), 1.0 - alpha);
    s[j] = static_cast<float>(
        std::clamp(v, static_cast<double>(kMinSmoothScale), static_cast<double>(kMaxSmoothScale)));
  }
  return s;
}

std::vector<float> ChannelAbsMax(const ir::Tensor& t, int64_t axis) {
  const AxisWalk walk(t.dims(), axis);
  std::vector<float> m(static_cast<size_t>(walk.size), 0.0f);
  const float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float& slot = m[static_cast<size_t>(walk.Channel(i))];
    slot = std::max(slot, std::fabs(p[i]));
  }
  return m;
}

namespace {

Result<ir::Tensor*> Editable(const ir::Model& model, const std::string& name,
                             std::map<std::string, ir::Tensor>* edits) {
  auto it = edits->find(name);
  if (it == edits->end()) {
    const ir::Value* v = model.graph->FindValue(name);
    QK_RETURN_IF_NOT(v && v->initializer, StatusCode::kInternal,
                     "smoothquant: '{}' is not an initializer", name);
    it = edits->emplace(name, *v->initializer).first;
  }
  return &it->second;
}

}  // namespace

Result<std::vector<float>> GroupWeightMax(const ir::Model& model, const SmoothGroup& group,
                                          const std::map<std::string, ir::Tensor>& edits) {
  std::vector<float> m(static_cast<size_t>(group.channels), 0.0f);
  for (const AxisEdit& w : group.weights) {
    auto it = edits.find(w.initializer);
    const ir::Value* v = model.graph->FindValue(w.initializer);
    QK_RETURN_IF_NOT(it != edits.end() || (v && v->initializer), StatusCode::kInternal,
                     "smoothquant: '{}' is not an initializer", w.initializer);
    const std::vector<float> c =
        ChannelAbsMax(it != edits.end() ? it->second : *v->initializer, w.axis);
    for (size_t j = 0; j < m.size() && j < c.size(); ++j) m[j] = std::max(m[j], c[j]);
  }
  return m;
}

Status ApplySmoothing(const ir::Model& model, const SmoothGroup& group, const std::vector<float>& s,
                      std::map<std::string, ir::Tensor>* edits) {
  QK_RETURN_IF_NOT(static_cast<int64_t>(s.size()) == group.channels, StatusCode::kInternal,
                   "smoothquant: {} scales for {} channels of '{}'", s.size(), group.channels,
                   group.activation);
  auto scale = [&](const AxisEdit& e, bool divide) -> Status {
    QK_ASSIGN_OR_RETURN(ir::Tensor * t, Editable(model, e.initializer, edits));
    if (!e.expand.empty() && t->dims() != e.expand) {
      QK_RETURN_IF_NOT(t->numel() == 1, StatusCode::kInternal,
                       "smoothquant: '{}' holds {} values, not one", e.initializer, t->numel());
      const float value = *t->data_as<float>();
      const std::string name = t->name;
      int64_t n = 1;
      for (int64_t d : e.expand) n *= d;
      *t = ir::Tensor::FromVector(ir::DType::kFloat, e.expand,
                                  std::vector<float>(static_cast<size_t>(n), value));
      t->name = name;
    }
    const AxisWalk walk(t->dims(), e.axis);
    QK_RETURN_IF_NOT(walk.size == group.channels, StatusCode::kInternal,
                     "smoothquant: '{}' has {} channels, not {}", e.initializer, walk.size,
                     group.channels);
    float* p = t->mutable_data_as<float>();
    for (int64_t i = 0; i < t->numel(); ++i) {
      const float f = s[static_cast<size_t>(walk.Channel(i))];
      p[i] = divide ? p[i] / f : p[i] * f;
    }
    return Status::Ok();
  };
  for (const AxisEdit& w : group.weights) QK_RETURN_IF_ERROR(scale(w, /*divide=*/false));
  for (const AxisEdit& f : group.folds) QK_RETURN_IF_ERROR(scale(f, /*divide=*/true));
  return Status::Ok();
}

}  // namespace quantkit::passes
