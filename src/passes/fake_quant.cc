#include "passes/fake_quant.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace quantkit::passes {

namespace {

bool IsOp(const ir::Node* n, const char* op) {
  return n != nullptr && n->domain().empty() && n->op_type() == op;
}

// True when `v` is an initializer holding only zeros of an 8-bit signed type (or is omitted).
bool IsInt8ZeroPoint(const ir::Value* v) {
  if (v == nullptr) return true;
  if (!v->is_constant() || v->initializer->dtype() != ir::DType::kInt8) return false;
  const int8_t* z = v->initializer->data_as<int8_t>();
  for (int64_t i = 0; i < v->initializer->numel(); ++i) {
    if (z[i] != 0) return false;
  }
  return true;
}

struct Pair {
  ir::Node* q = nullptr;
  ir::Node* dq = nullptr;
};

// The constant float values of an initializer.
std::vector<float> Floats(const ir::Value* v) {
  const float* p = v->initializer->data_as<float>();
  return std::vector<float>(p, p + v->initializer->numel());
}

}  // namespace

Status QdqToFakeQuant::Run(ir::Model& model, PassReport* report) const {
  const FakeQuantOptions& options = options_;
  ir::Graph& graph = *model.graph;
  std::vector<Pair> pairs;
  for (ir::Node* dq : graph.nodes()) {
    if (!IsOp(dq, "DequantizeLinear")) continue;
    ir::Node* q = dq->input(0) ? dq->input(0)->producer() : nullptr;
    QK_RETURN_IF_NOT(
        IsOp(q, "QuantizeLinear"), StatusCode::kUnsupported,
        "node '{}' (DequantizeLinear) does not read a QuantizeLinear: QAT needs Q -> DQ pairs",
        dq->name);
    const ir::Value* s = q->input(1);
    const ir::Value* ds = dq->input(1);
    QK_RETURN_IF_NOT(s && ds && s->is_constant() && ds->is_constant() &&
                         s->initializer->dtype() == ir::DType::kFloat &&
                         s->initializer->ContentEquals(*ds->initializer),
                     StatusCode::kUnsupported,
                     "Q/DQ pair '{}' -> '{}': scales must be the same float constant", q->name,
                     dq->name);
    QK_RETURN_IF_NOT(IsInt8ZeroPoint(q->input(2)) && IsInt8ZeroPoint(dq->input(2)),
                     StatusCode::kUnsupported,
                     "Q/DQ pair '{}' -> '{}': QAT supports symmetric int8 (zero point 0) only",
                     q->name, dq->name);
    QK_RETURN_IF_NOT(q->GetInt("axis", 1) == dq->GetInt("axis", 1), StatusCode::kUnsupported,
                     "Q/DQ pair '{}' -> '{}': different axes", q->name, dq->name);
    pairs.push_back({q, dq});
  }
  report->Add(counter::kWeightPairs, 0);
  report->Add(counter::kActivationPairs, 0);
  report->lists[std::string(list::kWeights)];
  if (!pairs.empty()) model.SetOpset(kFakeQuantDomain, 1);  // a model left as it was stays so
  for (const Pair& p : pairs) {
    ir::Value* x = p.q->input(0);
    ir::Value* scale = p.q->input(1);
    const bool weight = x->is_constant();
    const bool per_channel = scale->initializer->numel() > 1;  // one channel == per tensor
    const int64_t axis = per_channel ? p.q->GetInt("axis", 1) : -1;
    std::vector<ir::Value*> inputs{x};
    if (!(weight && options.recompute_weight_scales)) inputs.push_back(scale);
    if (!weight && options.learn_activation_scales) {
      // A private copy, so learning it never changes another pair that happened to share it.
      ir::Tensor copy =
          ir::Tensor::FromVector(ir::DType::kFloat, scale->initializer->dims(), Floats(scale));
      const std::string name = graph.UniqueValueName(x->name() + "_qat_scale");
      copy.name = name;
      inputs.back() = graph.AddInitializer(name, std::move(copy));
    }
    ir::Value* out = p.dq->output(0);
    const std::string out_name = out->name();
    QK_ASSIGN_OR_RETURN(ir::Node * fq,
                        graph.InsertNodeBefore(p.dq, "FakeQuantize", inputs,
                                               {graph.UniqueValueName(out_name + "_fq")},
                                               kFakeQuantDomain, p.dq->name + "_fq"));
    fq->SetAttr(ir::Attribute::Int("axis", axis));
    fq->SetAttr(ir::Attribute::Int("lsq", !weight && options.learn_activation_scales ? 1 : 0));
    graph.ReplaceAllUsesWith(out, fq->output(0));
    QK_RETURN_IF_ERROR(graph.RemoveNode(p.dq));
    QK_RETURN_IF_ERROR(graph.RenameValue(fq->output(0), out_name));
    report->Add(weight ? counter::kWeightPairs : counter::kActivationPairs);
    if (weight) report->Append(list::kWeights, x->name());
  }
  for (const Pair& p : pairs) {
    if (p.q->output(0)->uses().empty()) QK_RETURN_IF_ERROR(graph.RemoveNode(p.q));
  }
  report->changed = !pairs.empty();
  return Status::Ok();
}

std::map<std::string, std::string> LearnedActivationScales(const ir::Graph& graph) {
  std::map<std::string, std::string> scale_of;
  for (const ir::Node* n : graph.nodes()) {
    if (n->domain() != kFakeQuantDomain || n->op_type() != "FakeQuantize" ||
        n->GetInt("lsq", 0) != 1)
      continue;
    if (n->input(0) && n->input(1)) scale_of[n->input(0)->name()] = n->input(1)->name();
  }
  return scale_of;
}

Status FoldBatchNorm::Run(ir::Model& model, PassReport* report) const {
  ir::Graph& graph = *model.graph;
  int64_t folded = 0;
  std::vector<ir::Value*> orphans;  // constants only the folded nodes read
  for (ir::Node* bn : graph.nodes()) {
    // Guards, cheapest first; nothing is mutated until all pass.
    if (!IsOp(bn, "BatchNormalization") || bn->num_inputs() != 5) continue;
    if (bn->num_outputs() > 1 && std::any_of(bn->outputs().begin() + 1, bn->outputs().end(),
                                             [](const ir::Value* v) { return v != nullptr; })) {
      continue;  // training-mode outputs requested
    }
    ir::Value* y = bn->input(0);
    ir::Node* conv = y ? y->producer() : nullptr;
    if (!IsOp(conv, "Conv") || y->uses().size() != 1 || y->is_graph_output()) continue;
    const ir::Value* w = conv->input(1);
    const ir::Value* b = conv->input(2);
    if (w == nullptr || !w->is_constant() || w->initializer->dtype() != ir::DType::kFloat) continue;
    if (b != nullptr && (!b->is_constant() || b->initializer->dtype() != ir::DType::kFloat))
      continue;
    bool constant = true;
    for (size_t i = 1; i < 5; ++i) {
      const ir::Value* v = bn->input(i);
      constant = constant && v && v->is_constant() && v->initializer->dtype() == ir::DType::kFloat;
    }
    const int64_t channels = w->initializer->rank() > 0 ? w->initializer->dims()[0] : 0;
    for (size_t i = 1; constant && i < 5; ++i)
      constant = bn->input(i)->initializer->numel() == channels;
    if (!constant || channels == 0 || (b && b->initializer->numel() != channels)) continue;

    const double eps = bn->GetFloat("epsilon", 1e-5f);
    const std::vector<float> gamma = Floats(bn->input(1)), beta = Floats(bn->input(2)),
                             mean = Floats(bn->input(3)), var = Floats(bn->input(4));
    std::vector<float> bias =
        b ? Floats(b) : std::vector<float>(static_cast<size_t>(channels), 0.0f);
    ir::Tensor w2 = ir::Tensor::FromVector(ir::DType::kFloat, w->initializer->dims(), Floats(w));
    float* wd = w2.mutable_data_as<float>();
    const int64_t per = w->initializer->numel() / channels;
    std::vector<float> b2(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      const double k = static_cast<double>(gamma[c]) / std::sqrt(static_cast<double>(var[c]) + eps);
      for (int64_t j = 0; j < per; ++j) wd[c * per + j] = static_cast<float>(wd[c * per + j] * k);
      b2[c] = static_cast<float>((static_cast<double>(bias[c]) - mean[c]) * k + beta[c]);
    }
    const std::string wname = graph.UniqueValueName(w->name() + "_bnfolded");
    const std::string bname =
        graph.UniqueValueName((b ? b->name() : conv->name + "_bias") + "_bnfolded");
    w2.name = wname;
    ir::Tensor bt = ir::Tensor::FromVector(ir::DType::kFloat, {channels}, b2);
    bt.name = bname;
    ir::Value* wv = graph.AddInitializer(wname, std::move(w2));
    ir::Value* bv = graph.AddInitializer(bname, std::move(bt));
    orphans.insert(orphans.end(), {conv->input(1), conv->input(2)});
    graph.SetNodeInput(conv, 1, wv);
    graph.SetNodeInput(conv, 2, bv);
    orphans.insert(orphans.end(), {bn->input(1), bn->input(2), bn->input(3), bn->input(4)});
    ir::Value* z = bn->output(0);
    const std::string zname = z->name();
    graph.ReplaceAllUsesWith(z, y);
    QK_RETURN_IF_ERROR(graph.RemoveNode(bn));
    QK_RETURN_IF_ERROR(graph.RenameValue(y, zname));
    ++folded;
  }
  std::sort(orphans.begin(), orphans.end());
  orphans.erase(std::unique(orphans.begin(), orphans.end()), orphans.end());
  for (ir::Value* v : orphans) {
    if (v != nullptr && v->uses().empty() && !v->is_graph_output() && !v->is_graph_input()) {
      QK_RETURN_IF_ERROR(graph.RemoveValue(v));
    }
  }
  report->Add(counter::kFolded, folded);
  report->changed = folded > 0;
  return Status::Ok();
}

}  // namespace quantkit::passes
