#include "analysis/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

#include "common/check.h"
#include "ir/float16.h"
#include "runtime/observer.h"
#include "runtime/trt_fusions.h"

namespace quantkit::analysis {
namespace {

// More checkpoints than this add little (a trial starts at most 1/(k+1) of the graph too early)
// and cost matching time.
constexpr int kMaxCheckpoints = 32;

// Copies the named tensors of one run (the observer's views die with the callback).
class CaptureObserver : public runtime::Observer {
 public:
  CaptureObserver(const std::set<std::string>* wanted,
                  std::unordered_map<std::string, ir::Tensor>* out)
      : wanted_(wanted), out_(out) {}
  bool Wants(const std::string& name) const override { return wanted_->count(name) > 0; }
  Status OnTensor(const std::string& name, const ir::Node* /*producer*/,
                  const runtime::TensorView& view) override {
    if (view.dtype == ir::DType::kString)
      return Status::Ok();  // not byte-copyable: never a checkpoint
    ir::Tensor t(view.dtype, view.shape);
    if (t.nbytes() > 0) std::memcpy(t.mutable_data(), view.data, t.nbytes());
    (*out_)[name] = std::move(t);
    return Status::Ok();
  }

 private:
  const std::set<std::string>* wanted_;
  std::unordered_map<std::string, ir::Tensor>* out_;
};

bool SameAttribute(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.name != b.name || a.type != b.type || a.f != b.f || a.i != b.i || a.s != b.s ||
      a.floats != b.floats || a.ints != b.ints || a.strings != b.strings ||
      a.tensors.size() != b.tensors.size() || a.ref_attr_name != b.ref_attr_name) {
    return false;
  }
  // Subgraphs and sparse tensors are never compared: such nodes never match (conservative).
  if (!a.graphs.empty() || !b.graphs.empty() || !a.sparse_tensors.empty() ||
      !b.sparse_tensors.empty() || a.type_protos != b.type_protos) {
    return false;
  }
  if (a.type == ir::AttrType::kTensor && !a.t.ContentEquals(b.t)) return false;
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    if (!a.tensors[k].ContentEquals(b.tensors[k])) return false;
  }
  return true;
}

// For each float-model checkpoint position p (before node p of the topological order), the
// values produced before p that a node at or after p (or a graph output) still reads.
std::vector<std::vector<std::string>> LiveSets(const std::vector<ir::Node*>& order) {
  std::unordered_map<const ir::Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  std::vector<std::vector<std::string>> live(order.size() + 1);
  for (size_t i = 0; i < order.size(); ++i) {
    for (const ir::Value* v : order[i]->outputs()) {
      if (v == nullptr || v->name().empty()) continue;
      size_t last = v->is_graph_output() ? order.size() : i;
      for (const ir::Use& u : v->uses())
        last = std::max(last, pos.count(u.node) ? pos[u.node] : order.size());
      for (size_t p = i + 1; p <= last && p < order.size(); ++p) live[p].push_back(v->name());
    }
  }
  return live;
}

}  // namespace

Result<std::unique_ptr<PrefixCache>> PrefixCache::Create(const PlanEvaluator& evaluator,
                                                         const quant::QuantPlan& base,
                                                         int64_t budget_bytes) {
  auto cache = std::unique_ptr<PrefixCache>(new PrefixCache());
  const PlanEvalOptions& o = evaluator.options();
  QK_ASSIGN_OR_RETURN(ir::Model matched, BuildSimulationModel(o.model, base, o.simulation));
  cache->base_ = std::make_shared<const ir::Model>(std::move(matched));
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order,
                      evaluator.float_model().graph->TopologicalOrder());
  const std::vector<std::vector<std::string>> live = LiveSets(order);

  // The first batch keeps every candidate; its sizes, scaled to all samples, pick the
  // checkpoints; later batches keep only those.
  std::set<std::string> wanted;
  for (const auto& names : live) wanted.insert(names.begin(), names.end());
  std::vector<std::unordered_map<std::string, ir::Tensor>> captured(evaluator.num_batches());
  std::vector<std::unique_ptr<CaptureObserver>> observers;
  auto choose = [&]() {
    const auto& first = captured[0];
    // The first batch is the largest (only the last may be smaller): a safe estimate.
    const double scale = static_cast<double>(captured.size());
    const int n = static_cast<int>(order.size());
    std::set<std::string> chosen;
    for (int k = std::min(n - 1, kMaxCheckpoints); k >= 1 && chosen.empty(); --k) {
      std::set<std::string> names;
      double bytes = 0;
      for (int j = 1; j <= k; ++j) {
        for (const std::string& name : live[static_cast<size_t>(j * n / (k + 1))]) {
          auto it = first.find(name);
          if (it != first.end() && names.insert(name).second)
            bytes += static_cast<double>(it->second.nbytes()) * scale;
        }
      }
      if (bytes <= static_cast<double>(budget_bytes) && !names.empty()) {
        chosen = std::move(names);
        cache->checkpoints_ = k;
      }
    }
    wanted = std::move(chosen);
    for (auto it = captured[0].begin(); it != captured[0].end();) {
      it = wanted.count(it->first) ? std::next(it) : captured[0].erase(it);
    }
  };
  auto observer_for = [&](size_t batch) -> runtime::Observer* {
    if (batch == 1) choose();
    observers.push_back(std::make_unique<CaptureObserver>(&wanted, &captured[batch]));
    return observers.back().get();
  };
  QK_RETURN_IF_ERROR(evaluator.EvaluatePlan(base, {}, observer_for).status());
  if (captured.empty()) return cache;  // a rank without batches
  if (captured.size() == 1) choose();
  for (const std::string& name : wanted) {
    std::vector<ir::Tensor> per_batch;
    for (auto& batch : captured) {
      auto it = batch.find(name);
      if (it == batch.end()) break;  // not produced in every batch (not a plain activation): unused
      cache->bytes_ += static_cast<int64_t>(it->second.nbytes());
      per_batch.push_back(std::move(it->second));
    }
    if (per_batch.size() == captured.size())
      cache->activations_.emplace(name, std::move(per_batch));
  }
  return cache;
}

const ir::Tensor& PrefixCache::Activation(const std::string& name, size_t batch) const {
  return activations_.at(name).at(batch);
}

Result<std::vector<std::string>> PrefixCache::Cut(ir::Model* model) const {
  ir::Graph& g = *model->graph;
  const ir::Graph& b = *base_->graph;
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
  for (const ir::Node* n : order) {
    for (const ir::Attribute& a : n->attributes()) {
      if (!a.graphs.empty())
        return std::vector<std::string>{};  // outer-scope reads are not node inputs
    }
  }
  // Values of the trial that equal the base's value of the same name, by induction in
  // topological order.
  std::unordered_set<const ir::Value*> same;
  auto value_same = [&](const ir::Value* v) {
    const ir::Value* w = b.FindValue(v->name());
    if (w == nullptr) return false;
    if (v->is_graph_input() || w->is_graph_input()) {
      return v->is_graph_input() && w->is_graph_input() && !v->is_initializer() &&
             !w->is_initializer();
    }
    if (v->is_initializer() || w->is_initializer()) {
      return v->initializer && w->initializer && v->initializer->ContentEquals(*w->initializer);
    }
    return same.count(v) > 0;
  };
  auto node_same = [&](const ir::Node* n) {
    if (n->num_outputs() == 0 || n->output(0) == nullptr) return false;
    const ir::Value* first = b.FindValue(n->output(0)->name());
    const ir::Node* m = first ? first->producer() : nullptr;
    if (m == nullptr || m->op_type() != n->op_type() || m->domain() != n->domain() ||
        m->num_inputs() != n->num_inputs() || m->num_outputs() != n->num_outputs() ||
        m->attributes().size() != n->attributes().size()) {
      return false;
    }
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      if ((n->output(k) == nullptr) != (m->output(k) == nullptr)) return false;
      if (n->output(k) && n->output(k)->name() != m->output(k)->name()) return false;
    }
    for (size_t k = 0; k < n->num_inputs(); ++k) {
      const ir::Value* in = n->input(k);
      if ((in == nullptr) != (m->input(k) == nullptr)) return false;
      if (in && (in->name() != m->input(k)->name() || !value_same(in))) return false;
    }
    for (size_t k = 0; k < n->attributes().size(); ++k) {
      if (!SameAttribute(n->attributes()[k], m->attributes()[k])) return false;
    }
    return true;
  };
  // In an FP16/BF16 simulation a value's bits also depend on its readers: the interpreter keeps
  // it in FP32 where TensorRT fuses (runtime/trt_fusions.h: a DequantizeLinear read only by INT8
  // layers, an INT8 layer's output read only by QuantizeLinear), else rounds it to its type. A
  // trial that keeps a reader in float (fallback) changes that for the same producer: such a
  // value is not the cached one (it was, and the losses with and without the cache differed).
  auto stored_alike = [&](const ir::Value* v) {
    const ir::Value* w = b.FindValue(v->name());
    if (w == nullptr || v->type.dtype != w->type.dtype) return false;
    if (!ir::Is16BitFloat(v->type.dtype)) return true;  // FP32 values are never rounded
    return runtime::FusedIntoInt8Layers(v) == runtime::FusedIntoInt8Layers(w) &&
           runtime::RequantizedInEpilogue(v) == runtime::RequantizedInEpilogue(w);
  };
  for (const ir::Node* n : order) {
    if (!node_same(n)) continue;
    for (const ir::Value* v : n->outputs()) {
      if (v && stored_alike(v)) same.insert(v);
    }
  }
  // Such an FP32-kept value is never fed from the cache: the cache holds what an observer sees
  // (the value in its 16-bit type), and a graph input has no readers' fusion to keep it wide.
  auto kept_fp32_by_fusion = [](const ir::Value* v) {
    return ir::Is16BitFloat(v->type.dtype) &&
           (runtime::FusedIntoInt8Layers(v) || runtime::RequantizedInEpilogue(v));
  };
  // What the outputs need, stopping at matching cached values.
  std::unordered_set<const ir::Node*> needed;
  std::vector<ir::Value*> stops;
  std::vector<const ir::Value*> stack(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const ir::Value*> seen;
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (v == nullptr || !seen.insert(v).second || v->producer() == nullptr) continue;
    if (!v->is_graph_output() && same.count(v) && activations_.count(v->name()) &&
        !kept_fp32_by_fusion(v)) {
      stops.push_back(const_cast<ir::Value*>(v));
      continue;
    }
    if (!needed.insert(v->producer()).second) continue;
    for (const ir::Value* in : v->producer()->inputs()) stack.push_back(in);
  }
  if (stops.empty()) return std::vector<std::string>{};
  // Mutate only now: each stop becomes a graph input, then every node not needed goes.
  std::vector<std::pair<ir::Value*, std::string>> fed;
  for (ir::Value* s : stops) {
    ir::Value* in = g.CreateValue(g.UniqueValueName(s->name() + "/cached"));
    in->type = s->type;
    g.ReplaceAllUsesWith(s, in);
    g.AddInput(in);
    fed.emplace_back(in, s->name());
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!needed.count(*it)) QK_RETURN_IF_ERROR(g.RemoveNode(*it));
  }
  std::vector<std::string> names;
  for (auto& [in, name] : fed) {
    QK_RETURN_IF_ERROR(g.RenameValue(in, name));
    names.push_back(name);
  }
  return names;
}

}  // namespace quantkit::analysis
