// Control flow: If, Loop, Scan. Bodies are compiled into plans when the kernel is built (so an
// unsupported op inside a body fails before any compute) and run through
// KernelContext::RunSubgraph, which resolves the bodies' outer-scope captures from the calling
// frames.
#include <limits>

#include "runtime/aten_bridge.h"
#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

Result<std::shared_ptr<const SubgraphPlan>> Compile(const KernelInit& init, const char* attr) {
  const ir::Attribute* a = init.node.attr(attr);
  if (a == nullptr || a->graph() == nullptr) {
    return init.Error(StatusCode::kInvalidModel, "missing graph attribute '{}'", attr);
  }
  return init.compile_subgraph(*a->graph());
}

Result<KernelPtr> MakeIf(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const SubgraphPlan> then_plan, Compile(init, "then_branch"));
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const SubgraphPlan> else_plan, Compile(init, "else_branch"));
  return MakeKernel([then_plan, else_plan](KernelContext& c) {
    const at::Tensor& cond = c.in(0);
    QK_KERNEL_CHECK(cond.numel() == 1, "condition has {} elements, expected 1", cond.numel());
    return c.RunSubgraph(cond.item<bool>() ? *then_plan : *else_plan, {});
  });
}

// Loop(M, cond, v...) with body(iter, cond, v...) -> (cond, v..., scan...). Scan outputs are
// stacked along a new leading axis.
Result<KernelPtr> MakeLoop(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const SubgraphPlan> body, Compile(init, "body"));
  const ir::Graph& g = *init.node.attr("body")->graph();
  const size_t carried = init.node.num_inputs() >= 2 ? init.node.num_inputs() - 2 : 0;
  if (g.inputs().size() != carried + 2 || g.outputs().size() < carried + 1) {
    return init.Error(StatusCode::kInvalidModel,
                      "body has {} inputs and {} outputs for {} loop-carried values",
                      g.inputs().size(), g.outputs().size(), carried);
  }
  // dtypes of the scan outputs, for an empty result when the loop runs zero times.
  std::vector<at::ScalarType> scan_types;
  for (size_t i = carried + 1; i < g.outputs().size(); ++i) {
    at::ScalarType st = at::kFloat;
    if (g.outputs()[i]->type.is_tensor()) ToScalarType(g.outputs()[i]->type.dtype, &st);
    scan_types.push_back(st);
  }
  return MakeKernel([body, carried, scan_types](KernelContext& c) {
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    if (c.has(0)) max_trips = ToInt64Vector(c.in(0)).at(0);
    bool cond = c.has(1) ? c.in(1).item<bool>() : true;
    std::vector<at::Tensor> state;
    for (size_t i = 0; i < carried; ++i) state.push_back(c.in(i + 2));
    std::vector<std::vector<at::Tensor>> scans(scan_types.size());
    for (int64_t it = 0; it < max_trips && cond; ++it) {
      std::vector<at::Tensor> args = {at::scalar_tensor(it, at::kLong),
                                      at::scalar_tensor(cond, at::kBool)};
      args.insert(args.end(), state.begin(), state.end());
      std::vector<at::Tensor> outs = c.RunSubgraph(*body, args);
      cond = outs[0].item<bool>();
      for (size_t i = 0; i < carried; ++i) state[i] = outs[1 + i];
      for (size_t i = 0; i < scans.size(); ++i) scans[i].push_back(outs[1 + carried + i]);
    }
    Out out = state;
    for (size_t i = 0; i < scans.size(); ++i) {
      out.push_back(scans[i].empty() ? at::empty({0}, scan_types[i]) : at::stack(scans[i]));
    }
    return out;
  });
}

// Scan (9+): body(state..., scan_in_elems...) -> (state..., scan_out_elems...), iterated over
// the scan axis of every scan input (reversed where scan_input_directions is 1); scan outputs are
// stacked along scan_output_axes (in reverse for scan_output_directions 1).
Result<KernelPtr> MakeScan(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const SubgraphPlan> body, Compile(init, "body"));
  const int64_t num_scan = init.node.GetInt("num_scan_inputs", -1);
  const int64_t num_inputs = static_cast<int64_t>(init.node.num_inputs());
  if (num_scan < 1 || num_scan > num_inputs) {
    return init.Error(StatusCode::kInvalidModel, "num_scan_inputs={} for {} inputs", num_scan,
                      num_inputs);
  }
  const size_t num_state = static_cast<size_t>(num_inputs - num_scan);
  const size_t num_scan_out = init.node.num_outputs() - num_state;
  auto attr = [&](const char* name, size_t n) {
    std::vector<int64_t> v = init.node.GetInts(name);
    if (v.empty()) v.assign(n, 0);
    return v;
  };
  const std::vector<int64_t> in_axes = attr("scan_input_axes", num_scan);
  const std::vector<int64_t> in_dirs = attr("scan_input_directions", num_scan);
  const std::vector<int64_t> out_axes = attr("scan_output_axes", num_scan_out);
  const std::vector<int64_t> out_dirs = attr("scan_output_directions", num_scan_out);
  if (in_axes.size() != static_cast<size_t>(num_scan) || out_axes.size() != num_scan_out) {
    return init.Error(StatusCode::kInvalidModel,
                      "scan axes/directions do not match the scan inputs/outputs");
  }
  return MakeKernel([=](KernelContext& c) {
    std::vector<at::Tensor> state;
    for (size_t i = 0; i < num_state; ++i) state.push_back(c.in(i));
    std::vector<at::Tensor> xs;
    std::vector<int64_t> axes;
    int64_t steps = -1;
    for (int64_t j = 0; j < num_scan; ++j) {
      xs.push_back(c.in(num_state + j));
      axes.push_back(NormAxis(in_axes[j], xs.back().dim()));
      const int64_t len = xs.back().size(axes.back());
      QK_KERNEL_CHECK(steps < 0 || steps == len, "scan inputs have different lengths {} and {}",
                      steps, len);
      steps = len;
    }
    std::vector<std::vector<at::Tensor>> outs(num_scan_out);
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<at::Tensor> args = state;
      for (int64_t j = 0; j < num_scan; ++j)
        args.push_back(xs[j].select(axes[j], in_dirs[j] ? steps - 1 - t : t));
      std::vector<at::Tensor> r = c.RunSubgraph(*body, args);
      for (size_t i = 0; i < num_state; ++i) state[i] = r[i];
      for (size_t k = 0; k < num_scan_out; ++k) outs[k].push_back(r[num_state + k]);
    }
    Out result = state;
    for (size_t k = 0; k < num_scan_out; ++k) {
      QK_KERNEL_CHECK(!outs[k].empty(), "Scan over an empty sequence has no scan-output shape");
      if (out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
      const int64_t rank = outs[k][0].dim() + 1;
      result.push_back(at::stack(outs[k], NormAxis(out_axes[k], rank)));
    }
    return result;
  });
}

}  // namespace

void AppendControlFlowKernels(KernelTable& t) {
  t.push_back({"", "If", 1, kLatestOpset, MakeIf});
  t.push_back({"", "Loop", 1, kLatestOpset, MakeLoop});
  t.push_back({"", "Scan", 9, kLatestOpset, MakeScan});
}

}  // namespace quantkit::runtime
