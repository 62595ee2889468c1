#include "analysis/layer_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "common/text.h"
#include "ir/clone.h"
#include "ir/float16.h"
#include "runtime/interpreter.h"

namespace quantkit::analysis {
namespace {

// Elementwise ops a layer's block may extend over: each keeps the layer's output channels, reads
// only that output and constants, and is never a Q/DQ site of TensorRT's recipe.
const std::set<std::string>& BlockOps() {
  static const std::set<std::string> ops{
      "BatchNormalization", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid",
      "HardSwish",          "Elu",  "Selu", "Softplus",  "PRelu",   "Gelu"};
  return ops;
}

bool IsConstant(const ir::Value* v) { return v == nullptr || v->is_constant(); }

// Names of main-graph values read from inside the bodies of `node` (If/Loop/Scan captures).
void CollectCaptures(const ir::Graph& body, std::set<std::string>* names) {
  for (const ir::Value* v : body.values()) {
    if (v->is_outer_scope()) names->insert(v->name());
  }
  for (const ir::Node* n : body.nodes()) {
    for (const ir::Attribute& a : n->attributes()) {
      for (const auto& g : a.graphs) CollectCaptures(*g, names);
    }
  }
}

std::set<std::string> Captures(const ir::Node& node) {
  std::set<std::string> names;
  for (const ir::Attribute& a : node.attributes()) {
    for (const auto& g : a.graphs) CollectCaptures(*g, &names);
  }
  return names;
}

// Every main-graph value a node reads: its inputs and its bodies' captures.
std::vector<const ir::Value*> Reads(const ir::Graph& graph, const ir::Node& node) {
  std::vector<const ir::Value*> reads;
  for (const ir::Value* v : node.inputs()) {
    if (v) reads.push_back(v);
  }
  for (const std::string& name : Captures(node)) {
    if (const ir::Value* v = graph.FindValue(name)) reads.push_back(v);
  }
  return reads;
}

// Values (not constants) computed before `position` of `order` and read at or after it.
std::vector<std::string> LiveAt(const ir::Graph& graph, const std::vector<ir::Node*>& order,
                                int64_t position) {
  std::unordered_map<const ir::Value*, int64_t> defined, last_read;
  for (const ir::Value* in : graph.inputs()) {
    if (!in->is_initializer()) defined[in] = -1;
  }
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
    for (const ir::Value* out : order[static_cast<size_t>(i)]->outputs()) {
      if (out) defined[out] = i;
    }
    for (const ir::Value* v : Reads(graph, *order[static_cast<size_t>(i)])) last_read[v] = i;
  }
  std::vector<std::string> live;
  for (const auto& [v, at] : defined) {
    auto it = last_read.find(v);
    if (at < position && it != last_read.end() && it->second >= position) live.push_back(v->name());
  }
  std::sort(live.begin(), live.end());
  return live;
}

Result<int64_t> PositionOf(const std::vector<ir::Node*>& order, const std::string& output) {
  for (size_t i = 0; i < order.size(); ++i) {
    const ir::Node* n = order[i];
    if (n->num_outputs() > 0 && n->output(0) && n->output(0)->name() == output)
      return static_cast<int64_t>(i);
  }
  return MakeStatus(StatusCode::kInternal, "no node produces '{}'", output);
}

// The layer's position in the simulated model. A graph output keeps its name there: with an
// FP16/BF16 plan (inputs and outputs keeping their types) the float precision pass writes it with
// a Cast from the layer's 16-bit result, so the node producing `layer.output` is that Cast.
Result<int64_t> SimulatedPositionOf(const std::vector<ir::Node*>& order, const PtqLayer& layer) {
  QK_ASSIGN_OR_RETURN(int64_t position, PositionOf(order, layer.output));
  const ir::Node* n = order[static_cast<size_t>(position)];
  if (n->op_type() == layer.op_type || n->op_type() != "Cast" || n->input(0) == nullptr)
    return position;
  const ir::Node* producer = n->input(0)->producer();
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == producer && producer->op_type() == layer.op_type)
      return static_cast<int64_t>(i);
  }
  return MakeStatus(StatusCode::kInternal,
                    "layer cache: '{}' is written by a Cast of no {} in the simulation",
                    layer.output, layer.op_type);
}

int64_t StoreBytes(const std::map<std::string, std::vector<ir::Tensor>>& store) {
  int64_t bytes = 0;
  for (const auto& [name, per_batch] : store) {
    for (const ir::Tensor& t : per_batch) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

}  // namespace

Result<std::vector<PtqLayer>> FindPtqLayers(const ir::Model& float_model,
                                            const quant::QuantPlan& plan,
                                            const std::vector<passes::QdqSite>& sites,
                                            std::vector<SkippedLayer>* skipped) {
  const ir::Graph& g = *float_model.graph;
  std::unordered_set<const ir::Node*> site_consumers;
  std::unordered_map<const ir::Node*, const passes::QdqSite*> weight_site;
  for (const passes::QdqSite& s : sites) {
    site_consumers.insert(s.consumer);
    if (s.role != quant::TensorRole::kWeight) continue;
    if (s.consumer->owner() == &g) {
      weight_site[s.consumer] = &s;
    } else if (skipped) {
      // Layers inside If/Loop bodies run only when their branch does: the stages' per-layer runs
      // cannot reach them (Silero VAD's convolutions all sit in an If). Said, not silently skipped.
      const quant::TensorQuant* entry = plan.Find(s.tensor);
      if (entry && entry->quantized) {
        skipped->push_back(
            {s.consumer->name.empty() ? s.tensor : s.consumer->name,
             "it is inside an If/Loop body (the PTQ stages fit main-graph layers only)"});
      }
    }
  }
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
  std::vector<PtqLayer> layers;
  for (const ir::Node* n : order) {
    auto ws = weight_site.find(n);
    if (ws == weight_site.end()) continue;
    const quant::TensorQuant* entry = plan.Find(ws->second->tensor);
    if (!entry || !entry->quantized || plan.float_nodes.count(n->name)) continue;
    auto skip = [&](const std::string& why) {
      if (skipped) skipped->push_back({n->name.empty() ? n->output(0)->name() : n->name, why});
    };
    const ir::Value* w = n->input(static_cast<size_t>(ws->second->input_index));
    if (!w || !w->initializer || w->initializer->dtype() != ir::DType::kFloat ||
        w->is_graph_input()) {
      skip("its weight is not a float initializer");
      continue;
    }
    if (w->uses().size() != 1) {
      skip(fmt::format("its weight '{}' is shared by {} nodes", w->name(), w->uses().size()));
      continue;
    }
    PtqLayer layer;
    int activations = 0;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      if (IsConstant(n->input(i))) continue;
      ++activations;
      layer.data_input = n->input(i)->name();
      layer.data_input_index = i;
    }
    if (activations != 1 || n->num_outputs() < 1 || !n->output(0)) {
      skip(fmt::format("it reads {} non-constant inputs (one activation expected)", activations));
      continue;
    }
    if (n->op_type() == "MatMul" && ws->second->input_index != 1) {
      skip("its constant is the MatMul's first input");
      continue;
    }
    layer.node = n->name;
    layer.op_type = n->op_type();
    layer.output = n->output(0)->name();
    layer.weight = w->name();
    layer.output_channel_dim = (n->op_type() == "Conv" || n->op_type() == "ConvTranspose") ? 1 : -1;
    // Extend over the activations only this layer feeds, stopping before anything a site reads.
    const ir::Value* out = n->output(0);
    while (out->uses().size() == 1 && !out->is_graph_output()) {
      const ir::Node* next = out->uses()[0].node;
      bool ok = BlockOps().count(next->op_type()) && next->domain().empty() &&
                !site_consumers.count(next) && next->num_outputs() >= 1 && next->output(0) &&
                !plan.float_nodes.count(next->name);
      for (size_t i = 0; ok && i < next->num_inputs(); ++i) {
        ok = next->input(i) == out || IsConstant(next->input(i));
      }
      if (!ok) break;
      out = next->output(0);
    }
    layer.block_output = out->name();
    layers.push_back(std::move(layer));
  }
  return layers;
}

Result<ir::Model> ExtractSubModel(const ir::Model& model, const std::vector<std::string>& given,
                                  const std::vector<std::string>& wanted) {
  QK_ASSIGN_OR_RETURN(ir::Model sub, ir::CloneModel(model));
  ir::Graph& g = *sub.graph;
  // Named as what it is, so that any error of a run of it (an input it lacks) says so.
  g.name = fmt::format("sub-model of '{}' computing {} from {}", g.name, ListSome(wanted, 3),
                       ListSome(given, 3));
  // Given values become fresh inputs (renamed back below, once their producers are gone).
  std::map<std::string, ir::Value*> fresh;
  for (const std::string& name : given) {
    ir::Value* v = g.FindValue(name);
    QK_RETURN_IF_NOT(v != nullptr, StatusCode::kInternal, "sub-model: no value '{}'", name);
    if (v->is_graph_input()) continue;
    ir::Value* in = g.CreateValue(g.UniqueValueName(name + "__given"));
    in->type = v->type;
    g.ReplaceAllUsesWith(v, in);
    g.AddInput(in);
    fresh[name] = in;
  }
  g.ClearOutputs();
  for (const std::string& name : wanted) {
    ir::Value* v = fresh.count(name) ? fresh[name] : g.FindValue(name);
    QK_RETURN_IF_NOT(v != nullptr, StatusCode::kInternal, "sub-model: no value '{}'", name);
    g.AddOutput(v);
  }
  // What the outputs need, captures included.
  auto resolve = [&](const std::string& name) -> const ir::Value* {
    auto it = fresh.find(name);
    return it != fresh.end() ? it->second : g.FindValue(name);
  };
  std::unordered_set<const ir::Node*> needed;
  std::set<std::string> captured;
  std::vector<const ir::Value*> stack(g.outputs().begin(), g.outputs().end());
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (!v || !v->producer() || !needed.insert(v->producer()).second) continue;
    for (const ir::Value* in : v->producer()->inputs()) stack.push_back(in);
    for (const std::string& name : Captures(*v->producer())) {
      captured.insert(name);
      stack.push_back(resolve(name));
    }
  }
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!needed.count(*it)) QK_RETURN_IF_ERROR(g.RemoveNode(*it));
  }
  auto original_name = [&](const ir::Value* in) {
    for (const auto& [name, v] : fresh) {
      if (v == in) return name;
    }
    return in->name();
  };
  for (ir::Value* in : std::vector<ir::Value*>(g.inputs())) {
    if (in->uses().empty() && !captured.count(original_name(in)) && !in->is_graph_output()) {
      g.RemoveInput(in);
      if (in->is_initializer()) continue;
      for (auto it = fresh.begin(); it != fresh.end();)
        it = it->second == in ? fresh.erase(it) : std::next(it);
      QK_RETURN_IF_ERROR(g.RemoveValue(in));
    }
  }
  for (auto& [name, in] : fresh) {
    QK_RETURN_IF_NOT(g.FindValue(name) == nullptr, StatusCode::kInternal,
                     "sub-model: '{}' is still computed inside", name);
    QK_RETURN_IF_ERROR(g.RenameValue(in, name));
  }
  for (ir::Value* v : g.initializers()) {
    if (v->uses().empty() && !v->is_graph_input() && !v->is_graph_output() &&
        !captured.count(v->name())) {
      QK_RETURN_IF_ERROR(g.RemoveValue(v));
    }
  }
  return sub;
}

Result<ir::Model> ExtractLayerBlock(const ir::Model& float_model, const PtqLayer& layer) {
  return ExtractSubModel(float_model, {layer.data_input}, {layer.block_output});
}

Result<std::unique_ptr<LayerInputCache>> LayerInputCache::Create(
    std::shared_ptr<const ir::Model> float_model, std::vector<data::Batch> batches,
    const SimulationOptions& simulation) {
  QK_RETURN_IF_NOT(!batches.empty(), StatusCode::kInvalidArgument,
                   "the PTQ stages need at least one sample");
  auto cache = std::unique_ptr<LayerInputCache>(new LayerInputCache());
  cache->float_model_ = std::move(float_model);
  cache->simulation_ = simulation;
  cache->num_batches_ = batches.size();
  // Both runs start from the model inputs.
  for (data::Batch& b : batches) {
    cache->num_samples_ += b.size;
    for (auto& [name, t] : b.inputs) {
      cache->fp32_.store[name].push_back(t);
      cache->quantized_.store[name].push_back(std::move(t));
    }
  }
  for (const auto* side : {&cache->fp32_.store, &cache->quantized_.store}) {
    for (const auto& [name, per_batch] : *side) {
      QK_RETURN_IF_NOT(per_batch.size() == cache->num_batches_, StatusCode::kInvalidArgument,
                       "input '{}' is missing from some batches", name);
    }
  }
  cache->peak_bytes_ = cache->bytes();
  return cache;
}

int64_t LayerInputCache::bytes() const {
  return StoreBytes(fp32_.store) + StoreBytes(quantized_.store);
}

Status LayerInputCache::RunSegment(const ir::Model& model, int64_t position, Side* side) const {
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, model.graph->TopologicalOrder());
  QK_RETURN_IF_NOT(position >= side->position, StatusCode::kInternal,
                   "layer cache: layers out of order");
  const std::vector<std::string> live = LiveAt(*model.graph, order, position);
  std::vector<std::string> given, wanted;
  for (const auto& [name, per_batch] : side->store) given.push_back(name);
  for (const std::string& name : live) {
    if (!side->store.count(name)) wanted.push_back(name);
  }
  Store next;
  if (!wanted.empty()) {
    QK_ASSIGN_OR_RETURN(ir::Model segment, ExtractSubModel(model, given, wanted));
    runtime::InterpreterOptions options;
    options.check_finite_inputs = false;
    QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp,
                        runtime::Interpreter::Create(std::move(segment), options));
    for (size_t b = 0; b < num_batches_; ++b) {
      std::vector<runtime::NamedTensor> feeds;
      for (const std::string& name : interp->input_names()) {
        auto it = side->store.find(name);
        QK_RETURN_IF_NOT(it != side->store.end(), StatusCode::kInternal,
                         "layer cache: '{}' was not kept", name);
        feeds.push_back({name, it->second[b]});
      }
      QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> outs, interp->Run(feeds));
      for (runtime::NamedTensor& o : outs) next[o.name].push_back(std::move(o.tensor));
    }
  }
  for (const std::string& name : live) {
    auto it = side->store.find(name);
    if (it != side->store.end()) next[name] = std::move(it->second);
  }
  side->store = std::move(next);
  side->position = position;
  return Status::Ok();
}

Result<LayerInputCache::LayerInputs> LayerInputCache::Advance(const PtqLayer& layer,
                                                              const quant::QuantPlan& plan) {
  LayerInputs inputs;
  {
    QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, float_model_->graph->TopologicalOrder());
    QK_ASSIGN_OR_RETURN(int64_t position, PositionOf(order, layer.output));
    QK_RETURN_IF_ERROR(RunSegment(*float_model_, position, &fp32_));
    auto it = fp32_.store.find(layer.data_input);
    QK_RETURN_IF_NOT(it != fp32_.store.end(), StatusCode::kInternal,
                     "layer cache: no FP32 input '{}'", layer.data_input);
    inputs.fp32 = it->second;
  }
  {
    QK_ASSIGN_OR_RETURN(ir::Model simulated,
                        BuildSimulationModel(*float_model_, plan, simulation_));
    QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, simulated.graph->TopologicalOrder());
    QK_ASSIGN_OR_RETURN(int64_t position, SimulatedPositionOf(order, layer));
    QK_RETURN_IF_ERROR(RunSegment(simulated, position, &quantized_));
    const ir::Value* in = order[static_cast<size_t>(position)]->input(layer.data_input_index);
    QK_RETURN_IF_NOT(in != nullptr, StatusCode::kInternal, "layer cache: '{}' lost its input",
                     layer.output);
    auto it = quantized_.store.find(in->name());
    QK_RETURN_IF_NOT(it != quantized_.store.end(), StatusCode::kInternal,
                     "layer cache: no simulated input '{}'", in->name());
    // The layer blocks the PTQ stages fit compute in FP32; with an FP16/BF16 plan the simulated
    // input is stored in that dtype (what TensorRT reads): widened, exactly, to float.
    inputs.quantized.reserve(it->second.size());
    for (const ir::Tensor& t : it->second) {
      if (!ir::Is16BitFloat(t.dtype())) {
        inputs.quantized.push_back(t);
        continue;
      }
      QK_ASSIGN_OR_RETURN(ir::Tensor wide, ir::ConvertFloatTensor(t, ir::DType::kFloat));
      inputs.quantized.push_back(std::move(wide));
    }
  }
  peak_bytes_ = std::max(peak_bytes_, bytes());
  return inputs;
}

}  // namespace quantkit::analysis
