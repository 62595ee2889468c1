// Plan building (kernel resolution, slot assignment, liveness) and execution of ir graphs.
//
// A graph compiles to a SubgraphPlan: every value gets a slot index; each step names its input
// and output slots and the slots whose last consumer it is (freed right after it runs). Values
// captured from an enclosing graph (If/Loop bodies) are resolved by name through the chain of
// calling frames when the subgraph starts; the enclosing node counts as a consumer of each
// capture, so liveness keeps them alive until that node has run.
//
// Observers see the main graph's tensors; those that ask (Observer::WantsSubgraphTensors) also
// see each body's, under the qualified names of ir/scopes.h: a body run gets a RunState of its
// own (BodyWatch), made once per body plan and run, without the hook and the memory accounting.
#include "runtime/interpreter.h"

#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "ir/float16.h"
#include "ir/scopes.h"
#include "quantkit/cancel.h"
#include "runtime/aten_bridge.h"
#include "runtime/device_placement.h"
#include "runtime/float_precision.h"
#include "runtime/heap.h"
#include "runtime/interpreter_aten.h"
#include "runtime/kernel.h"
#include "runtime/memory_order.h"
#include "runtime/registry.h"
#include "runtime/tensor_budget.h"
#include "runtime/tensor_stats_aten.h"
#include "runtime/training_ops.h"

namespace quantkit::runtime {

namespace {

// A failure inside a (possibly nested) step, already formatted with the node it happened at.
struct NodeFailure {
  Status status;
};

thread_local bool channels_last_run = false;

// InterpreterOptions::channels_last when unset: off, unless QUANTKIT_CHANNELS_LAST=1. Off by
// default: unobserved runs then sum in another order than observed ones, which moved fallback
// losses between cached-prefix and whole trials and the simulate-vs-onnxruntime first-code rule
// (e2e.accuracy_fallback, e2e.simulate_vs_ort); opt in where only speed matters.
bool ChannelsLastByDefault() {
  const char* env = std::getenv("QUANTKIT_CHANNELS_LAST");
  return env != nullptr && std::string(env) == "1";
}

bool LooksLikeOom(const std::string& msg) {
  return msg.find("alloc") != std::string::npos ||
         msg.find("not enough memory") != std::string::npos ||
         msg.find("out of memory") != std::string::npos;
}

}  // namespace

bool ChannelsLastRun() { return channels_last_run; }
ChannelsLastRunScope::ChannelsLastRunScope(bool on) : previous_(channels_last_run) {
  channels_last_run = on;
}
ChannelsLastRunScope::~ChannelsLastRunScope() { channels_last_run = previous_; }

class SubgraphPlan {
 public:
  struct Step {
    const ir::Node* node = nullptr;
    int64_t opset = 0;
    KernelPtr kernel;
    std::vector<int> inputs;   // -1: omitted optional input
    std::vector<int> outputs;  // -1: omitted optional output
    std::vector<int> free_after;
    // Per input: its slot is read last by this step (and only once), so the step receives the
    // slot's own reference instead of a copy (kernel.h: a kernel may reuse such a buffer).
    std::vector<bool> hand_over;
    std::string where;
    StepPrecision precision;  // float16 / bfloat16 handling (float_precision.h)
  };

  const ir::Graph* graph = nullptr;
  std::vector<Step> steps;
  std::vector<std::string> slot_names;
  std::vector<std::string>
      slot_qualified;  // what observers see (ir/scopes.h); = slot_names at the top
  std::vector<const ir::Node*> slot_producer;
  std::unordered_map<std::string, int> slot_by_name;
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  std::vector<std::pair<int, at::Tensor>> constants;  // initializers, wrapped without copy
  // Per slot: the 16-bit type of a float16 / bfloat16 initializer, held widened to float32 in
  // `constants` (float_precision.h); Undefined for every other slot.
  std::vector<at::ScalarType> constant_logical;
  std::vector<std::pair<int, std::string>> local_captures;  // slots filled from outer frames
  std::vector<std::string> captures;   // every name resolved outside this graph (transitive)
  std::vector<bool> is_free_at_start;  // unused constants/inputs, dropped before the first step
};

namespace {

struct RunState;

struct Frame {
  const SubgraphPlan* plan = nullptr;
  RunState* state = nullptr;  // observation of this frame (nullptr: none)
  std::vector<at::Tensor> slots;
  // Per slot: the 16-bit type of a value held as float32 (float_precision.h), else Undefined.
  std::vector<at::ScalarType> logical;
  const Frame* parent = nullptr;
  // The step being executed ("node 'x' (Reshape, opset 13)"), so that an error escaping the
  // per-step handlers still names the node.
  const std::string* where = nullptr;
  at::Device device = at::kCPU;  // the interpreter's compute device
};

class PlanBuilder {
 public:
  PlanBuilder(const ir::Model& model, at::Device device, bool training, bool channels_last)
      : model_(model), device_(device), training_(training), channels_last_(channels_last) {}

  Result<std::shared_ptr<SubgraphPlan>> Build(const ir::Graph& graph,
                                              const std::string& scope = "") {
    auto plan = std::make_shared<SubgraphPlan>();
    plan->graph = &graph;
    std::unordered_map<const ir::Value*, int> slot_of;
    auto slot = [&](const ir::Value* v) {
      auto it = slot_of.find(v);
      if (it != slot_of.end()) return it->second;
      const int s = static_cast<int>(plan->slot_names.size());
      slot_of.emplace(v, s);
      plan->slot_names.push_back(v->name());
      plan->slot_qualified.push_back(ir::QualifiedName(scope, v->name()));
      plan->slot_producer.push_back(v->producer());
      plan->slot_by_name[v->name()] = s;
      return s;
    };
    for (const ir::Value* v : graph.inputs()) plan->input_slots.push_back(slot(v));
    std::vector<std::pair<int, at::ScalarType>> widened;
    for (const ir::Value* v : graph.initializers()) {
      QK_ASSIGN_OR_RETURN(at::Tensor t,
                          WrapTensor(*v->initializer, "initializer '" + v->name() + "'"));
      // 16-bit float weights are widened once, here: every kernel computes in float32.
      if (Is16BitFloat(t.scalar_type())) {
        widened.emplace_back(slot(v), t.scalar_type());
        t = t.to(at::kFloat);
      }
      // Weights move to the device once, here; shape constants stay on the host (KeepOnHost).
      if (!device_.is_cpu() && !KeepOnHost(t)) t = t.to(device_);
      plan->constants.emplace_back(slot(v), t);
    }
    if (!graph.sparse_initializers().empty()) {
      return MakeStatus(StatusCode::kUnsupported, "sparse initializer '{}' is not supported",
                        graph.sparse_initializers().front()->name());
    }
    for (const ir::Value* v : graph.values()) {
      if (v->is_outer_scope()) {
        plan->local_captures.emplace_back(slot(v), v->name());
        plan->captures.push_back(v->name());
      }
    }
    QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, graph.TopologicalOrder());
    std::vector<std::vector<int>> implicit_inputs;
    for (const ir::Node* node : order) {
      SubgraphPlan::Step step;
      step.node = node;
      step.opset = model_.OpsetFor(node->domain());
      step.where = DescribeNode(*node, step.opset);
      KernelFactory factory =
          training_ ? FindTrainingKernel(node->domain(), node->op_type()) : nullptr;
      if (factory == nullptr) {
        factory = FindKernel(ir::CanonicalDomain(node->domain()), node->op_type(), step.opset);
      }
      if (factory == nullptr) {
        return MakeStatus(StatusCode::kUnsupported,
                          "unsupported op '{}' (domain '{}', opset {}) at node '{}'",
                          node->op_type(), node->domain().empty() ? "ai.onnx" : node->domain(),
                          step.opset, DisplayName(*node));
      }
      std::vector<std::shared_ptr<const SubgraphPlan>> subplans;
      KernelInit init{*node, step.opset, nullptr};
      init.channels_last = channels_last_;
      init.compile_subgraph =
          [this, &subplans, &scope,
           node](const ir::Graph& g) -> Result<std::shared_ptr<const SubgraphPlan>> {
        std::string attribute;
        for (const ir::Attribute& a : node->attributes()) {
          for (const auto& sub : a.graphs) {
            if (sub.get() == &g) attribute = a.name;
          }
        }
        QK_ASSIGN_OR_RETURN(std::shared_ptr<SubgraphPlan> sub,
                            Build(g, ir::SubgraphScope(scope, *node, attribute)));
        subplans.push_back(sub);
        return std::shared_ptr<const SubgraphPlan>(sub);
      };
      QK_ASSIGN_OR_RETURN(step.kernel, factory(init));
      step.precision = PlanStepPrecision(*node);
      for (const ir::Value* v : node->inputs()) step.inputs.push_back(v ? slot(v) : -1);
      for (const ir::Value* v : node->outputs()) step.outputs.push_back(v ? slot(v) : -1);
      // Captures of the bodies: consumers here, or captures of this graph in turn.
      std::vector<int> implicit;
      for (const auto& sub : subplans) {
        for (const std::string& name : sub->captures) {
          auto it = plan->slot_by_name.find(name);
          if (it != plan->slot_by_name.end()) {
            implicit.push_back(it->second);
          } else {
            plan->captures.push_back(name);
          }
        }
      }
      implicit_inputs.push_back(std::move(implicit));
      plan->steps.push_back(std::move(step));
    }
    for (const ir::Value* v : graph.outputs()) plan->output_slots.push_back(slot(v));

    // Liveness: a slot is freed after its last consumer; graph outputs are never freed.
    const size_t n = plan->slot_names.size();
    plan->constant_logical.assign(n, at::ScalarType::Undefined);
    for (const auto& [s, type] : widened) plan->constant_logical[s] = type;
    std::vector<int> last_use(n, -1);
    std::vector<bool> keep(n, false);
    for (int s : plan->output_slots) keep[s] = true;
    for (size_t i = 0; i < plan->steps.size(); ++i) {
      for (int s : plan->steps[i].inputs)
        if (s >= 0) last_use[s] = static_cast<int>(i);
      for (int s : implicit_inputs[i]) last_use[s] = static_cast<int>(i);
    }
    for (size_t i = 0; i < plan->steps.size(); ++i) {
      for (int s : plan->steps[i].outputs)
        if (s >= 0 && last_use[s] < 0) last_use[s] = static_cast<int>(i);
    }
    plan->is_free_at_start.assign(n, false);
    for (size_t s = 0; s < n; ++s) {
      if (keep[s]) continue;
      if (last_use[s] >= 0) {
        plan->steps[last_use[s]].free_after.push_back(static_cast<int>(s));
      } else {
        plan->is_free_at_start[s] = true;
      }
    }
    for (size_t i = 0; i < plan->steps.size(); ++i) {
      SubgraphPlan::Step& step = plan->steps[i];
      step.hand_over.assign(step.inputs.size(), false);
      for (size_t j = 0; j < step.inputs.size(); ++j) {
        const int s = step.inputs[j];
        if (s < 0 || keep[s] || last_use[s] != static_cast<int>(i)) continue;
        step.hand_over[j] =
            std::count(step.inputs.begin(), step.inputs.end(), s) == 1 &&
            std::count(implicit_inputs[i].begin(), implicit_inputs[i].end(), s) == 0;
      }
    }
    return plan;
  }

 private:
  const ir::Model& model_;
  at::Device device_;
  bool training_ = false;
  bool channels_last_ = false;
};

struct BodyWatch;

// Device statistics of a run waiting for their copy to the host: all of a run's watched tensors
// come back in one copy when the run ends (one synchronisation instead of one per tensor and
// observer: on a GPU those waits took most of calibrate's time, docs/gpu.md "Session 16"), or
// earlier when they hold more than kMaxPendingBytes (a long Loop). Observers get them in the
// order the tensors were computed, as they would have one by one.
class PendingStats {
 public:
  // Also bounds the tensors kept for an exact recomputation (runtime/tensor_stats_aten.h, kFast).
  static constexpr int64_t kMaxPendingBytes = int64_t{256} << 20;

  Status Add(Observer* obs, const std::string& name, const ir::Node* producer,
             PendingTensorStats stats) {
    if (stats.packed.defined()) bytes_ += static_cast<int64_t>(stats.packed.nbytes());
    if (stats.source.defined()) bytes_ += static_cast<int64_t>(stats.source.nbytes());
    items_.push_back({obs, name, producer, std::move(stats)});
    return bytes_ > kMaxPendingBytes ? Flush() : Status::Ok();
  }

  Status Flush() {
    std::vector<Item> items;
    items.swap(items_);
    bytes_ = 0;
    QK_RETURN_IF_ERROR(Finish(items));
    for (Item& it : items)
      QK_RETURN_IF_ERROR(it.obs->OnStats(it.name, it.producer, it.stats.stats));
    return Status::Ok();
  }

 private:
  struct Item {
    Observer* obs;
    std::string name;
    const ir::Node* producer;
    PendingTensorStats stats;
  };

  // Copies the items' figures to the host in one copy and finishes them; the few whose fast
  // statistics met a non-finite value are recomputed exactly from the tensor they kept.
  static Status Finish(std::vector<Item>& items) {
    std::vector<at::Tensor> packed;
    for (const Item& it : items) {
      if (!it.stats.packed.defined()) continue;
      // One device per run in practice; a value a kernel left elsewhere joins the first's.
      packed.push_back(packed.empty() ? it.stats.packed
                                      : it.stats.packed.to(packed.front().device()));
    }
    at::Tensor host;
    if (!packed.empty()) host = at::cat(packed).to(at::kCPU).contiguous();
    const double* v = host.defined() ? host.data_ptr<double>() : nullptr;
    for (Item& it : items) {
      if (!it.stats.packed.defined()) continue;
      QK_RETURN_IF_ERROR(CompleteTensorStats(v, &it.stats));
      v += it.stats.packed.numel();
    }
    return Status::Ok();
  }

  std::vector<Item> items_;
  int64_t bytes_ = 0;
};

struct RunState {
  const AtenRunOptions* options = nullptr;
  std::vector<std::vector<Observer*>> watchers;  // per slot of the plan this state observes
  BodyWatch* bodies = nullptr;                   // nullptr: no observer watches bodies
  PendingStats* pending = nullptr;               // nullptr: device statistics delivered at once
};

// The observers that watch body tensors, and one RunState per body plan met in this run.
struct BodyWatch {
  std::vector<Observer*> observers;
  AtenRunOptions options;  // no hook, no stats: bodies are observed only
  std::unordered_map<const SubgraphPlan*, std::unique_ptr<RunState>> states;
  PendingStats* pending = nullptr;  // the run's

  RunState* For(const SubgraphPlan& plan) {
    std::unique_ptr<RunState>& state = states[&plan];
    if (!state) {
      state = std::make_unique<RunState>();
      state->options = &options;
      state->bodies = this;
      state->pending = pending;
      state->watchers.resize(plan.slot_names.size());
      for (Observer* obs : observers) {
        for (size_t s = 0; s < plan.slot_names.size(); ++s) {
          if (obs->Wants(plan.slot_qualified[s])) state->watchers[s].push_back(obs);
        }
      }
    }
    return state.get();
  }
};

// `logical`: the slot's 16-bit type when it holds float32 storage of a float16 / bfloat16 value
// (float_precision.h); observers that take tensors as they are see that type.
Status Notify(RunState& state, const SubgraphPlan& plan, int slot, at::Tensor& value,
              at::ScalarType logical = at::ScalarType::Undefined) {
  const std::string& name = plan.slot_qualified[slot];
  const ir::Node* producer = plan.slot_producer[slot];
  RECORD_USER_SCOPE(
      "qk::observe");  // a no-op unless `quantkit --profile` records (runtime/profiler.h)
  if (state.options->hook) QK_RETURN_IF_ERROR(state.options->hook(name, producer, value));
  for (Observer* obs : state.watchers[slot]) {
    const TensorStatsRequest* request = obs->StatsRequestFor(name);
    if (request != nullptr && !value.is_complex() &&
        (!value.device().is_cpu() || DeviceStatsOnHost())) {
      if (state.pending != nullptr) {
        QK_ASSIGN_OR_RETURN(PendingTensorStats pending, LaunchTensorStats(value, *request));
        QK_RETURN_IF_ERROR(state.pending->Add(obs, name, producer, std::move(pending)));
        continue;
      }
      QK_ASSIGN_OR_RETURN(TensorStats stats, ComputeTensorStats(value, *request));
      QK_RETURN_IF_ERROR(obs->OnStats(name, producer, stats));
      continue;
    }
    at::Tensor t = value.device().is_cpu() ? value : value.cpu();
    if (obs->WantsFloat() && t.scalar_type() != at::kFloat && !t.is_complex()) t = t.to(at::kFloat);
    if (!obs->WantsFloat()) t = Materialize(t, logical);
    t = t.contiguous();
    TensorView view{FromScalarType(t.scalar_type()), t.sizes().vec(), t.data_ptr()};
    QK_RETURN_IF_ERROR(obs->OnTensor(name, producer, view));
  }
  return Status::Ok();
}

void FillConstants(const SubgraphPlan& plan, Frame& frame) {
  frame.slots.assign(plan.slot_names.size(), at::Tensor());
  frame.logical = plan.constant_logical;
  for (const auto& [s, t] : plan.constants) {
    if (!plan.is_free_at_start[s]) frame.slots[s] = t;
  }
}

// Runs one kernel. On a GPU interpreter, a kernel may meet inputs on two devices (a host shape
// tensor next to a device activation) or build host temporaries of its own; when it fails that
// way it runs again with every input on the device, then, failing that too, on the host (the
// outputs stay where that kernel produced them). A failure of the retries reports the first error;
// out-of-memory is never retried.
std::vector<at::Tensor> ComputeStep(const SubgraphPlan::Step& step, std::vector<at::Tensor>& inputs,
                                    Frame& frame) {
  if (!frame.device.is_cpu()) {
    // Host values that kernels made (Constant, Cast of a Shape, ...) join the device here, as
    // initializers do at Create; small integer tensors stay where kernels read them (KeepOnHost).
    // A node whose inputs are all such small integer tensors, some fed to the device, is shape
    // arithmetic: it runs on the host.
    bool host = false, all_small = true;
    for (at::Tensor& t : inputs) {
      if (!t.defined()) continue;
      all_small &= KeepOnHost(t);
      host |= t.device().is_cpu() && t.dim() > 0;
      if (t.dim() > 0 && t.device().is_cpu() && !KeepOnHost(t)) t = ToDevice(t, frame.device);
    }
    if (host && all_small) {
      for (at::Tensor& t : inputs) {
        if (t.defined()) t = t.cpu();
      }
    }
  }
  try {
    KernelContext ctx(inputs, step.outputs.size(), &frame);
    return step.kernel->Compute(ctx);
  } catch (const c10::Error& e) {
    if (frame.device.is_cpu() || LooksLikeOom(e.what_without_backtrace())) throw;
    bool mixed = false;
    for (const at::Tensor& t : inputs) mixed |= t.defined() && t.device() != frame.device;
    if (!mixed) throw;
    CountMixedDeviceRetry(step.node != nullptr ? step.node->op_type() : std::string("?"));
    for (const at::Device target : {frame.device, at::Device(at::kCPU)}) {
      std::vector<at::Tensor> moved = inputs;
      for (at::Tensor& t : moved) {
        if (t.defined()) t = t.to(target);
      }
      try {
        KernelContext ctx(moved, step.outputs.size(), &frame);
        return step.kernel->Compute(ctx);
      } catch (const c10::Error&) {
      }
    }
    throw;
  }
}

void Execute(Frame& frame, RunState* state) {
  const SubgraphPlan& plan = *frame.plan;
  std::vector<at::Tensor> inputs;
  std::vector<at::ScalarType> logical;  // of the inputs (float_precision.h)
  for (const SubgraphPlan::Step& step : plan.steps) {
    inputs.assign(step.inputs.size(), at::Tensor());
    logical.assign(step.inputs.size(), at::ScalarType::Undefined);
    for (size_t j = 0; j < step.inputs.size(); ++j) {
      const int s = step.inputs[j];
      if (s < 0) continue;
      logical[j] = frame.logical[s];
      if (!frame.slots[s].defined()) {
        throw NodeFailure{
            Status(StatusCode::kInvalidArgument,
                   fmt::format("{}: input '{}' has no value (not fed or not produced)", step.where,
                               plan.slot_names[s]))};
      }
      inputs[j] = step.hand_over[j] ? std::move(frame.slots[s]) : frame.slots[s];
    }
    std::vector<at::Tensor> outputs;
    frame.where = &step.where;
    try {
      // 16-bit float inputs compute in float32; type16: the 16-bit type of the float results.
      const at::ScalarType type16 = PrepareInputs(step.precision, inputs, logical);
      {
        RECORD_USER_SCOPE(step.where);  // the node's kernels under its name in a profile
        outputs = ComputeStep(step, inputs, frame);
      }
      for (size_t j = 0; j < step.outputs.size() && j < outputs.size(); ++j) {
        if (step.outputs[j] >= 0)
          frame.logical[step.outputs[j]] = FinishOutput(step.precision, j, type16, outputs[j]);
      }
    } catch (const NodeFailure&) {
      throw;
    } catch (const KernelError& e) {
      throw NodeFailure{Status(StatusCode::kInvalidArgument, step.where + ": " + e.what())};
    } catch (const TensorBudgetExceeded& e) {
      throw NodeFailure{Status(StatusCode::kResourceExhausted, step.where + ": " + e.what())};
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      throw NodeFailure{
          Status(LooksLikeOom(msg) ? StatusCode::kResourceExhausted : StatusCode::kInvalidArgument,
                 step.where + ": " + msg)};
    } catch (const std::bad_alloc&) {
      throw NodeFailure{Status(StatusCode::kResourceExhausted, step.where + ": out of memory")};
    } catch (const InternalError&) {
      throw;  // a quantkit bug: exit 70
    } catch (const std::exception& e) {
      // Debian's libc10 does not always match `catch (c10::Error&)` across the shared-library
      // boundary (its what() is ATen's message): any other exception from a kernel is ATen
      // rejecting the model's or the data's shapes and values, i.e. bad input naming the node.
      const std::string msg = e.what();
      throw NodeFailure{
          Status(LooksLikeOom(msg) ? StatusCode::kResourceExhausted : StatusCode::kInvalidArgument,
                 step.where + ": " + msg)};
    }
    inputs.clear();
    for (size_t j = 0; j < step.outputs.size(); ++j) {
      const int s = step.outputs[j];
      if (s < 0) continue;
      if (j >= outputs.size() || !outputs[j].defined()) {
        throw NodeFailure{
            Status(StatusCode::kInternal, fmt::format("{}: output {} ('{}') was not produced",
                                                      step.where, j, plan.slot_names[s]))};
      }
      frame.slots[s] = std::move(outputs[j]);
      if (state != nullptr && (state->options->hook || !state->watchers[s].empty())) {
        Status st = Notify(*state, plan, s, frame.slots[s], frame.logical[s]);
        if (!st.ok()) throw NodeFailure{st};
      }
    }
    for (int s : step.free_after) frame.slots[s] = at::Tensor();
    if (state != nullptr && state->options->stats != nullptr) {
      // Bytes of distinct storages, so views (Reshape, Transpose) are not counted twice.
      std::unordered_set<const void*> seen;
      int64_t bytes = 0, count = 0;
      for (const at::Tensor& t : frame.slots) {
        if (!t.defined()) continue;
        ++count;
        if (seen.insert(t.storage().data()).second)
          bytes += static_cast<int64_t>(t.storage().nbytes());
      }
      RunStats& st = *state->options->stats;
      st.peak_live_bytes = std::max(st.peak_live_bytes, bytes);
      st.peak_live_values = std::max(st.peak_live_values, count);
    }
  }
}

}  // namespace

std::vector<at::Tensor> KernelContext::RunSubgraph(const SubgraphPlan& plan,
                                                   const std::vector<at::Tensor>& inputs) const {
  Frame child;
  child.plan = &plan;
  child.parent = static_cast<const Frame*>(frame_);
  child.device = child.parent->device;
  const RunState* outer = child.parent->state;
  if (outer != nullptr && outer->bodies != nullptr) child.state = outer->bodies->For(plan);
  FillConstants(plan, child);
  QK_KERNEL_CHECK(inputs.size() <= plan.input_slots.size(), "subgraph takes {} inputs, got {}",
                  plan.input_slots.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) child.slots[plan.input_slots[i]] = inputs[i];
  for (const auto& [s, name] : plan.local_captures) {
    for (const Frame* f = child.parent; f != nullptr; f = f->parent) {
      auto it = f->plan->slot_by_name.find(name);
      if (it != f->plan->slot_by_name.end() && f->slots[it->second].defined()) {
        child.slots[s] = f->slots[it->second];
        child.logical[s] = f->logical[it->second];
        break;
      }
    }
    QK_KERNEL_CHECK(child.slots[s].defined(), "outer-scope value '{}' is not available", name);
  }
  if (child.state != nullptr) {
    for (int s : plan.input_slots) {
      if (!child.slots[s].defined() || child.state->watchers[s].empty()) continue;
      Status st = Notify(*child.state, plan, s, child.slots[s]);
      if (!st.ok()) throw NodeFailure{st};
    }
  }
  Execute(child, child.state);
  std::vector<at::Tensor> out;
  for (int s : plan.output_slots) {
    QK_KERNEL_CHECK(child.slots[s].defined(), "subgraph output '{}' has no value",
                    plan.slot_names[s]);
    out.push_back(Materialize(child.slots[s], child.logical[s]));
  }
  return out;
}

const at::Tensor& KernelContext::in(size_t i) const {
  QK_KERNEL_CHECK(has(i), "required input {} is missing", i);
  return inputs_[i];
}

// ------------------------------------------------------------------------------- Interpreter

struct Interpreter::Impl {
  std::shared_ptr<const ir::Model> model;
  InterpreterOptions options;
  std::shared_ptr<SubgraphPlan> plan;
  Device device;
  at::Device aten_device = at::kCPU;
  bool channels_last = false;            // kernels built for channels-last runs (memory_order.h)
  std::vector<std::string> input_names;  // required feeds
  std::vector<std::string> output_names;
  int64_t constant_bytes = 0;  // the model's side of the tensor budget (tensor_budget.h)

  void Warn(const std::string& msg) const {
    if (options.warn) {
      options.warn(msg);
    } else {
      std::fprintf(stderr, "quantkit: warning: %s\n", msg.c_str());
    }
  }
  Status CheckInput(const ir::Value& v, const at::Tensor& t) const;
  Status SetParameters(const std::vector<std::pair<std::string, at::Tensor>>& params,
                       Frame& frame) const;
  Result<std::vector<at::Tensor>> Run(const std::vector<std::pair<std::string, at::Tensor>>& inputs,
                                      const AtenRunOptions& options) const;
};

namespace {

// `t` in `v`'s float type when both are float types of another width (InterpreterOptions::
// convert_float_inputs); anything else unchanged, for CheckInput to judge.
Result<at::Tensor> ToInputFloatType(const ir::Value& v, at::Tensor t) {
  const ir::DType want = v.type.is_tensor() ? v.type.dtype : ir::DType::kUndefined;
  const ir::DType got = FromScalarType(t.scalar_type());
  auto is_float = [](ir::DType d) { return d == ir::DType::kFloat || ir::Is16BitFloat(d); };
  if (want == got || !is_float(want) || !is_float(got)) return t;
  at::ScalarType target;
  QK_RETURN_IF_NOT(ToScalarType(want, &target), StatusCode::kInternal,
                   "input '{}': no ATen type for {}", v.name(), ir::DTypeName(want));
  return t.to(target);
}

}  // namespace

Status Interpreter::Impl::CheckInput(const ir::Value& v, const at::Tensor& t) const {
  const ir::TypeInfo& type = v.type;
  if (!type.is_tensor()) return Status::Ok();
  const ir::DType got = FromScalarType(t.scalar_type());
  if (type.dtype != ir::DType::kUndefined && got != type.dtype) {
    return MakeStatus(StatusCode::kInvalidArgument, "input '{}' has dtype {}, expected {}",
                      v.name(), ir::DTypeName(got), type.ToString());
  }
  if (!type.has_shape) return Status::Ok();
  bool ok = static_cast<size_t>(t.dim()) == type.dims.size();
  for (size_t i = 0; ok && i < type.dims.size(); ++i) {
    if (type.dims[i].is_known() && type.dims[i].value != t.size(static_cast<int64_t>(i)))
      ok = false;
  }
  if (!ok) {
    return MakeStatus(StatusCode::kInvalidArgument, "input '{}' has shape [{}], expected {}",
                      v.name(), fmt::join(t.sizes(), ","), type.ToString());
  }
  return Status::Ok();
}

Status Interpreter::Impl::SetParameters(
    const std::vector<std::pair<std::string, at::Tensor>>& params, Frame& frame) const {
  const SubgraphPlan& p = *plan;
  for (const auto& [name, t] : params) {
    auto it = p.slot_by_name.find(name);
    const ir::Value* v = p.graph->FindValue(name);
    if (it == p.slot_by_name.end() || v == nullptr || !v->initializer.has_value()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "parameter '{}' names no initializer of the graph", name);
    }
    const ir::Tensor& init = *v->initializer;
    if (FromScalarType(t.scalar_type()) != init.dtype() || t.sizes().vec() != init.dims()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "parameter '{}' is {}[{}], the initializer {}[{}]", name,
                        ir::DTypeName(FromScalarType(t.scalar_type())), fmt::join(t.sizes(), ","),
                        ir::DTypeName(init.dtype()), fmt::join(init.dims(), ","));
    }
    if (!p.is_free_at_start[it->second]) frame.slots[it->second] = t;
  }
  return Status::Ok();
}

Result<std::vector<at::Tensor>> Interpreter::Impl::Run(
    const std::vector<std::pair<std::string, at::Tensor>>& inputs,
    const AtenRunOptions& opts) const {
  const SubgraphPlan& p = *plan;
  Frame frame;
  frame.plan = &p;
  frame.device = aten_device;
  FillConstants(p, frame);
  if (opts.parameters != nullptr) QK_RETURN_IF_ERROR(SetParameters(*opts.parameters, frame));
  std::unordered_set<std::string> fed;
  for (const auto& [name, given] : inputs) {
    const ir::Value* v = nullptr;
    for (const ir::Value* in : p.graph->inputs()) {
      if (in->name() == name) v = in;
    }
    if (v == nullptr) {
      return MakeStatus(
          StatusCode::kInvalidArgument, "unknown input '{}' for {}; its inputs are: {}", name,
          p.graph->name.empty() ? std::string("the model") : "'" + p.graph->name + "'",
          fmt::join(input_names, ", "));
    }
    if (!fed.insert(name).second) {
      return MakeStatus(StatusCode::kInvalidArgument, "input '{}' is given twice", name);
    }
    at::Tensor t = given;
    if (options.convert_float_inputs) {
      QK_ASSIGN_OR_RETURN(t, ToInputFloatType(*v, std::move(t)));
    }
    QK_RETURN_IF_ERROR(CheckInput(*v, t));
    if (options.check_finite_inputs && t.is_floating_point() && t.numel() > 0) {
      const int64_t nan = at::isnan(t).sum().item<int64_t>();
      const int64_t inf = at::isinf(t).sum().item<int64_t>();
      if (nan + inf > 0) {
        Warn(fmt::format("input '{}' contains {} NaN and {} Inf values (continuing)", name, nan,
                         inf));
      }
    }
    const int s = p.slot_by_name.at(name);
    if (!p.is_free_at_start[s]) frame.slots[s] = ToDevice(t, aten_device);
  }
  for (const std::string& name : input_names) {
    if (!fed.count(name)) {
      const ir::Value* v = p.graph->FindValue(name);
      return MakeStatus(StatusCode::kInvalidArgument, "missing input '{}' ({})", name,
                        v ? v->type.ToString() : "?");
    }
  }
  // A tiny file cannot make gigabytes: every tensor of this run is checked against the budget.
  int64_t budget_base = constant_bytes;
  for (const auto& feed : inputs) budget_base += static_cast<int64_t>(feed.second.nbytes());
  QK_ASSIGN_OR_RETURN(const int64_t budget, TensorBudgetBytes(budget_base));
  const TensorBudgetScope budget_scope(budget);
  RunState state;
  PendingStats pending;
  state.options = &opts;
  state.pending = &pending;
  const bool notify = opts.hook || !opts.observers.empty() || opts.stats != nullptr;
  state.watchers.resize(p.slot_names.size());
  BodyWatch bodies;
  for (Observer* obs : opts.observers) {
    for (size_t s = 0; s < p.slot_names.size(); ++s) {
      if (obs->Wants(p.slot_names[s])) state.watchers[s].push_back(obs);
    }
    if (obs->WantsSubgraphTensors()) bodies.observers.push_back(obs);
  }
  bodies.pending = &pending;
  if (!bodies.observers.empty()) state.bodies = &bodies;
  frame.state = notify ? &state : nullptr;
  // Observed runs keep NCHW (memory_order.h); memory accounting (stats) needs no views.
  ChannelsLastRunScope memory_order(channels_last && !opts.hook && opts.observers.empty());
  try {
    if (notify) {
      for (int s : p.input_slots) {
        if (frame.slots[s].defined()) QK_RETURN_IF_ERROR(Notify(state, p, s, frame.slots[s]));
      }
    }
    Execute(frame, notify ? &state : nullptr);
    QK_RETURN_IF_ERROR(pending.Flush());
  } catch (const NodeFailure& f) {
    return f.status;
  } catch (const TensorBudgetExceeded& e) {
    return Status(StatusCode::kResourceExhausted,
                  (frame.where ? *frame.where + ": " : std::string()) + e.what());
  } catch (const c10::Error& e) {
    // ATen rejects shapes and values that came from the model or the data (an impossible
    // Reshape): bad input, named by the node, not an internal error.
    const std::string msg = e.what_without_backtrace();
    const std::string where = frame.where ? *frame.where + ": " : std::string();
    return Status(LooksLikeOom(msg) ? StatusCode::kResourceExhausted : StatusCode::kInvalidArgument,
                  where + msg);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted,
                  (frame.where ? *frame.where + ": " : std::string()) + "out of memory");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal,
                  (frame.where ? *frame.where + ": " : std::string()) + e.what());
  }
  std::vector<at::Tensor> out;
  for (int s : p.output_slots) {
    if (!frame.slots[s].defined()) {
      return MakeStatus(StatusCode::kInvalidArgument, "graph output '{}' was not computed",
                        p.slot_names[s]);
    }
    out.push_back(Materialize(frame.slots[s], frame.logical[s]));
  }
  return out;
}

Interpreter::Interpreter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Interpreter::~Interpreter() = default;

Result<std::unique_ptr<Interpreter>> Interpreter::Create(std::shared_ptr<const ir::Model> model,
                                                         InterpreterOptions options) {
  if (!model || !model->graph) return Status(StatusCode::kInvalidArgument, "no model");
  // Freed activations stay in the heap for the next run (no page faults per run; heap.h).
  KeepFreedMemoryForReuse();
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->device = options.device.value_or(DefaultDevice());
  QK_RETURN_IF_ERROR(UseDevice(impl->device));
  impl->aten_device = ToAtenDevice(impl->device);
  impl->options = std::move(options);
  try {
    impl->channels_last = impl->aten_device.is_cpu() && !impl->options.training &&
                          impl->options.channels_last.value_or(ChannelsLastByDefault());
    PlanBuilder builder(*model, impl->aten_device, impl->options.training, impl->channels_last);
    QK_ASSIGN_OR_RETURN(impl->plan, builder.Build(*model->graph));
    for (const auto& constant : impl->plan->constants)
      impl->constant_bytes += static_cast<int64_t>(constant.second.nbytes());
  } catch (const c10::Error& e) {
    return Status(StatusCode::kInvalidModel, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, e.what());
  }
  for (const ir::Value* v : model->graph->inputs()) {
    if (!v->is_initializer()) impl->input_names.push_back(v->name());
  }
  for (const ir::Value* v : model->graph->outputs()) impl->output_names.push_back(v->name());
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(impl)));
}

Result<std::unique_ptr<Interpreter>> Interpreter::Create(ir::Model&& model,
                                                         InterpreterOptions options) {
  return Create(std::make_shared<const ir::Model>(std::move(model)), std::move(options));
}

const std::vector<std::string>& Interpreter::input_names() const { return impl_->input_names; }
const std::vector<std::string>& Interpreter::output_names() const { return impl_->output_names; }
const ir::Model& Interpreter::model() const { return *impl_->model; }
Device Interpreter::device() const { return impl_->device; }

Result<std::vector<NamedTensor>> Interpreter::Run(const std::vector<NamedTensor>& inputs,
                                                  const RunOptions& options) const {
  QK_RETURN_IF_ERROR(CheckCancelled());  // every long call runs the model: Ctrl-C stops it here
  c10::InferenceMode guard;
  std::vector<std::pair<std::string, at::Tensor>> feeds;
  for (const NamedTensor& in : inputs) {
    QK_ASSIGN_OR_RETURN(at::Tensor t, WrapTensor(in.tensor, "input '" + in.name + "'"));
    feeds.emplace_back(in.name, t);
  }
  AtenRunOptions aten_options;
  aten_options.observers = options.observers;
  aten_options.stats = options.stats;
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> outs, impl_->Run(feeds, aten_options));
  std::vector<NamedTensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t,
                        ToIrTensor(outs[i], "output '" + impl_->output_names[i] + "'"));
    result.push_back({impl_->output_names[i], std::move(t)});
  }
  return result;
}

Result<std::vector<at::Tensor>> RunAten(
    const Interpreter& interpreter, const std::vector<std::pair<std::string, at::Tensor>>& inputs,
    const AtenRunOptions& options) {
  QK_RETURN_IF_ERROR(CheckCancelled());
  return interpreter.impl().Run(inputs, options);
}

}  // namespace quantkit::runtime
