// Control flow: If and Loop. Bodies are compiled into plans when the kernel is built (so an
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
    return init.Error(StatusCode::kInvalidModel, "body has {} inputs and {} outputs for {} loop-carried values",
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
      std::vector<at::Tensor> args = {at::scalar_tensor(it, at::kLong), at::scalar_tensor(cond, at::kBool)};
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

}  // namespace

void AppendControlFlowKernels(KernelTable& t) {
  t.push_back({"", "If", 1, kLatestOpset, MakeIf});
  t.push_back({"", "Loop", 1, kLatestOpset, MakeLoop});
}

}  // namespace quantkit::runtime
