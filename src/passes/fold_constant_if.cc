#include "passes/fold_constant_if.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/check.h"

namespace quantkit::passes {
namespace {

// Flattened values of a small tensor; nullopt marks an element not known before run time (a
// symbolic dimension of Shape(x)).
using Known = std::vector<std::optional<double>>;

// Conditions are scalars computed from shapes; anything larger is not worth evaluating.
constexpr int64_t kMaxKnownElements = 64;
// Guards the recursion on long chains; exporters write 3-6 nodes before an If.
constexpr int kMaxDepth = 32;

std::optional<Known> FromInitializer(const ir::Tensor& t) {
  const int64_t n = t.numel();
  if (n > kMaxKnownElements || t.data() == nullptr) return std::nullopt;
  Known out;
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case ir::DType::kBool:
      case ir::DType::kUint8:
        out.push_back(t.data_as<uint8_t>()[i]);
        break;
      case ir::DType::kInt8:
        out.push_back(t.data_as<int8_t>()[i]);
        break;
      case ir::DType::kInt32:
        out.push_back(t.data_as<int32_t>()[i]);
        break;
      case ir::DType::kInt64:
        out.push_back(static_cast<double>(t.data_as<int64_t>()[i]));
        break;
      case ir::DType::kFloat:
        out.push_back(t.data_as<float>()[i]);
        break;
      case ir::DType::kDouble:
        out.push_back(t.data_as<double>()[i]);
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

// Elementwise with scalar broadcasting; an unknown operand gives an unknown result.
template <typename Fn>
std::optional<Known> Binary(const Known& a, const Known& b, Fn fn) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  Known out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& x = a[a.size() == 1 ? 0 : i];
    const auto& y = b[b.size() == 1 ? 0 : i];
    if (x && y) out[i] = fn(*x, *y);
  }
  return out;
}

std::optional<Known> Evaluate(const ir::Value* v, int depth);

std::optional<Known> EvaluateNode(const ir::Node& n, int depth) {
  const std::string& op = n.op_type();
  auto in = [&](size_t i) { return Evaluate(n.input(i), depth + 1); };
  if (op == "Shape" || op == "Size") {
    const ir::Value* x = n.input(0);
    if (!x || !x->type.is_tensor() || !x->type.has_shape) return std::nullopt;
    Known dims;
    for (const ir::Dim& d : x->type.dims) {
      dims.push_back(d.is_known() ? std::optional<double>(static_cast<double>(d.value))
                                  : std::nullopt);
    }
    if (op == "Size") {
      double size = 1;
      for (const auto& d : dims) {
        if (!d) return Known{std::nullopt};
        size *= *d;
      }
      return Known{size};
    }
    // Shape-15 start/end, clamped like the spec.
    const auto rank = static_cast<int64_t>(dims.size());
    auto clamp = [rank](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
    const int64_t start = clamp(n.GetInt("start", 0)), end = clamp(n.GetInt("end", rank));
    return Known(dims.begin() + start, dims.begin() + std::max(start, end));
  }
  if (op == "Identity" || op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" ||
      op == "Flatten") {
    return in(0);  // same values, flattened
  }
  if (op == "Cast") {
    std::optional<Known> x = in(0);
    if (!x) return std::nullopt;
    const auto to = static_cast<ir::DType>(n.GetInt("to", 0));
    for (auto& e : *x) {
      if (!e) continue;
      if (to == ir::DType::kBool)
        e = *e != 0 ? 1.0 : 0.0;
      else if (to != ir::DType::kFloat && to != ir::DType::kDouble)
        e = std::trunc(*e);
    }
    return x;
  }
  if (op == "Gather") {
    std::optional<Known> data = in(0), idx = in(1);
    if (!data || !idx || n.GetInt("axis", 0) != 0) return std::nullopt;
    // Only 1-D data (a shape vector): indices pick elements.
    const ir::Value* d = n.input(0);
    if (d->type.has_shape && d->type.dims.size() > 1) return std::nullopt;
    Known out;
    const auto size = static_cast<int64_t>(data->size());
    for (const auto& i : *idx) {
      if (!i) return std::nullopt;
      int64_t k = static_cast<int64_t>(*i);
      if (k < 0) k += size;
      if (k < 0 || k >= size) return std::nullopt;
      out.push_back((*data)[static_cast<size_t>(k)]);
    }
    return out;
  }
  if (op == "Not") {
    std::optional<Known> x = in(0);
    if (!x) return std::nullopt;
    for (auto& e : *x) {
      if (e) e = *e == 0 ? 1.0 : 0.0;
    }
    return x;
  }
  using Fn = double (*)(double, double);
  static const std::map<std::string, Fn> kBinary = {
      {"Equal", [](double a, double b) { return static_cast<double>(a == b); }},
      {"Less", [](double a, double b) { return static_cast<double>(a < b); }},
      {"LessOrEqual", [](double a, double b) { return static_cast<double>(a <= b); }},
      {"Greater", [](double a, double b) { return static_cast<double>(a > b); }},
      {"GreaterOrEqual", [](double a, double b) { return static_cast<double>(a >= b); }},
      {"And", [](double a, double b) { return static_cast<double>(a != 0 && b != 0); }},
      {"Or", [](double a, double b) { return static_cast<double>(a != 0 || b != 0); }},
      {"Xor", [](double a, double b) { return static_cast<double>((a != 0) != (b != 0)); }},
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
  };
  if (auto it = kBinary.find(op); it != kBinary.end() && n.num_inputs() == 2) {
    std::optional<Known> a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    return Binary(*a, *b, it->second);
  }
  return std::nullopt;
}

std::optional<Known> Evaluate(const ir::Value* v, int depth) {
  if (v == nullptr || depth > kMaxDepth) return std::nullopt;
  if (v->is_constant() && v->initializer) return FromInitializer(*v->initializer);
  if (v->producer() == nullptr || !v->producer()->domain().empty()) return std::nullopt;
  return EvaluateNode(*v->producer(), depth);
}

// The value the taken branch's uses of `v` must read in `target`, or nullptr when it cannot be
// resolved (then the If is left alone). Captures resolve by name in the enclosing graph.
ir::Value* ResolveCapture(ir::Graph& target, const ir::Value* v) {
  if (ir::Value* found = target.FindValue(v->name())) return found;
  if (target.parent() == nullptr) return nullptr;
  ir::Value* capture = target.CreateValue(v->name());
  if (capture) target.MarkOuterScope(capture);
  return capture;
}

// Removes `node` when nothing reads its outputs, then its producers the same way: the condition's
// Shape -> Gather -> Equal -> Cast chain, dead once its If is gone.
Status RemoveDeadCone(ir::Graph& g, ir::Node* node) {
  // A body reads an enclosing value through a capture of its own, not a use: keep those names.
  std::set<std::string> captured;
  for (ir::Node* n : g.nodes()) {
    for (ir::Attribute& a : n->attributes()) {
      for (auto& sub : a.graphs) {
        ir::ForEachGraph(*sub, [&](ir::Graph& body) {
          for (const ir::Value* v : body.values()) {
            if (v->is_outer_scope()) captured.insert(v->name());
          }
        });
      }
    }
  }
  std::vector<ir::Node*> pending;
  if (node) pending.push_back(node);
  std::set<ir::Node*> removed;
  while (!pending.empty()) {
    ir::Node* n = pending.back();
    pending.pop_back();
    if (removed.count(n) || n->owner() != &g) continue;
    bool dead = true;
    for (const ir::Value* out : n->outputs()) {
      dead &=
          !out || (out->uses().empty() && !out->is_graph_output() && !captured.count(out->name()));
    }
    if (!dead) continue;
    std::vector<ir::Node*> producers;
    for (const ir::Value* in : n->inputs()) {
      if (in && in->producer()) producers.push_back(in->producer());
    }
    QK_RETURN_IF_ERROR(g.RemoveNode(n));
    removed.insert(n);
    pending.insert(pending.end(), producers.begin(), producers.end());
  }
  return Status::Ok();
}

// Checks everything first, then inlines `branch` before `node` and removes `node`.
Result<bool> InlineBranch(ir::Graph& g, ir::Node* node, ir::Graph& branch) {
  if (branch.outputs().size() != node->num_outputs() || !branch.inputs().empty() ||
      !branch.sparse_initializers().empty()) {
    return false;
  }
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, branch.TopologicalOrder());
  bool has_nested = false, renamed = false;
  for (const ir::Node* n : order) {
    for (const ir::Attribute& a : n->attributes()) has_nested |= !a.graphs.empty();
    for (const ir::Value* out : n->outputs()) {
      if (out && g.UniqueValueName(out->name()) != out->name()) renamed = true;
    }
  }
  for (const ir::Value* init : branch.initializers()) {
    if (g.UniqueValueName(init->name()) != init->name()) renamed = true;
  }
  // A nested body captures branch values by name: renaming them would cut the capture.
  if (has_nested && renamed) return false;
  for (const ir::Value* v : branch.values()) {
    if (v->producer() || v->is_initializer()) continue;
    if (!v->is_outer_scope()) {
      if (!v->uses().empty() || v->is_graph_output()) return false;  // read but never defined
    } else if (!g.FindValue(v->name()) && !g.parent()) {
      return false;  // a capture the enclosing graph does not define
    }
  }

  std::map<const ir::Value*, ir::Value*> mapped;
  for (ir::Value* v : branch.values()) {
    if (v->is_outer_scope() && !v->is_initializer()) mapped[v] = ResolveCapture(g, v);
  }
  for (ir::Value* init : branch.initializers()) {
    ir::Tensor t = *init->initializer;  // shares the bytes
    const std::string name = g.UniqueValueName(init->name());
    t.name = name;
    ir::Value* moved = g.AddInitializer(name, std::move(t));
    moved->type = init->type;
    mapped[init] = moved;
  }
  std::set<const ir::Node*> inlined;
  for (ir::Node* n : order) {
    std::vector<ir::Value*> inputs;
    for (ir::Value* in : n->inputs()) inputs.push_back(in ? mapped.at(in) : nullptr);
    std::vector<std::string> names;
    for (const ir::Value* out : n->outputs())
      names.push_back(out ? g.UniqueValueName(out->name()) : "");
    const std::string node_name = n->name.empty() ? "" : g.UniqueNodeName(n->name);
    QK_ASSIGN_OR_RETURN(ir::Node * copy, g.InsertNodeBefore(node, n->op_type(), inputs, names,
                                                            n->domain(), node_name));
    for (ir::Attribute& a : n->attributes()) {
      for (auto& sub : a.graphs) sub->set_parent(&g);
      copy->SetAttr(std::move(a));
    }
    copy->doc_string = n->doc_string;
    copy->metadata_props = n->metadata_props;
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      if (!n->output(i)) continue;
      copy->output(i)->type = n->output(i)->type;
      copy->output(i)->has_value_info = n->output(i)->has_value_info;
      mapped[n->output(i)] = copy->output(i);
    }
    inlined.insert(copy);
  }

  // The If's outputs keep their names: the inlined producer's output takes the name, or an
  // Identity where the branch returns a value it did not compute (a capture, an initializer).
  std::vector<std::pair<ir::Value*, std::string>> renames;
  std::set<const ir::Value*> claimed;
  for (size_t i = 0; i < node->num_outputs(); ++i) {
    ir::Value* out = node->output(i);
    if (!out) continue;
    ir::Value* source = mapped.at(branch.outputs()[i]);
    if (!source->producer() || !inlined.count(source->producer()) || claimed.count(source)) {
      QK_ASSIGN_OR_RETURN(ir::Node * id,
                          g.InsertNodeBefore(node, "Identity", {source},
                                             {g.UniqueValueName(out->name() + "_folded")}));
      source = id->output(0);
    }
    claimed.insert(source);
    if (out->type.is_tensor()) source->type = out->type;
    source->has_value_info |= out->has_value_info;
    renames.emplace_back(source, out->name());
    g.ReplaceAllUsesWith(out, source);
  }
  ir::Node* cond_producer = node->input(0) ? node->input(0)->producer() : nullptr;
  QK_RETURN_IF_ERROR(g.RemoveNode(node));
  for (auto& [value, name] : renames) QK_RETURN_IF_ERROR(g.RenameValue(value, name));
  QK_RETURN_IF_ERROR(RemoveDeadCone(g, cond_producer));
  return true;
}

// Subgraphs first (an If nested in a branch folds before its parent is inlined).
Status FoldInGraph(ir::Graph& graph, int64_t* folded) {
  int64_t count = 0;
  for (ir::Node* node : graph.nodes()) {
    for (ir::Attribute& a : node->attributes()) {
      for (auto& sub : a.graphs) QK_RETURN_IF_ERROR(FoldInGraph(*sub, &count));
    }
  }
  // Until nothing changes: an inlined branch may hold an If of its own.
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::Node* node : graph.nodes()) {
      if (node->op_type() != "If" || !node->domain().empty() || node->num_inputs() != 1) continue;
      const std::optional<Known> cond = Evaluate(node->input(0), 0);
      if (!cond || cond->size() != 1 || !(*cond)[0]) continue;
      const ir::Attribute* taken = node->attr(*(*cond)[0] != 0 ? "then_branch" : "else_branch");
      if (taken == nullptr || taken->graph() == nullptr) continue;
      QK_ASSIGN_OR_RETURN(bool inlined, InlineBranch(graph, node, *taken->graph()));
      if (inlined) {
        ++count;
        changed = true;
        break;  // the node list changed
      }
    }
  }
  // Inlined nodes sit just before their If; a sort makes the order valid whatever the stored order
  // was.
  if (count > 0) QK_RETURN_IF_ERROR(graph.SortTopologically());
  *folded += count;
  return Status::Ok();
}

}  // namespace

Status FoldConstantIf::Run(ir::Model& model, PassReport* report) const {
  int64_t folded = 0;
  QK_RETURN_IF_ERROR(FoldInGraph(*model.graph, &folded));
  report->Add(counter::kFolded, folded);
  report->changed = folded > 0;
  if (folded > 0) {
    report->summary = fmt::format(
        "{} If node(s) with a condition fixed by the model (a constant or a "
        "static dimension) replaced by the branch taken",
        folded);
  }
  return Status::Ok();
}

}  // namespace quantkit::passes
