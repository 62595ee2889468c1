// Rewrites  float model + QuantPlan + placement  ->  the Q/DQ model of that plan.
//
// ApplyPlan is the ONLY code that turns a plan into Q/DQ sites, weight scales and inserted pairs:
// calibrate and fallback (written artifacts), convert (cache/plan -> Q/DQ ONNX, QOperator ->
// Q/DQ), and the INT8 simulation of eval / analyze / compare-methods all call it, so the model a
// simulation runs and the model a user exports cannot disagree.
//
//   sites   = policy kTensorRT: passes::FindQdqSites(graph, placement + plan.float_nodes excluded)
//             policy kPlan:     passes::SitesFromPlan(graph, plan) minus sites read by float_nodes
//             policy kAuto:     kPlan when the plan came from a Q/DQ model (sources "qdq:"), else
//                               kTensorRT
//   weights = plan entries for weight sites, filled per channel (max|w|/127) when missing
//   first, plan.initializers (PTQ stages' weights) replace the initializers they name
//   pairs   = passes::InsertQdq(plan, sites), run on the model (weights stored as
//   options.weight_storage) types   = passes::ConvertFloatPrecision(plan.float_precision): the
//   float part in the plan's float
//             dtype (FP16 by default for a written model), FP32 islands where the plan says
//
// Requires a float model loaded for quantization (constants as initializers). Mutates the model
// only after the sites and weight scales are computed; the plan gains the filled weight entries.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/insert_qdq.h"
#include "passes/pass.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

enum class PlacementPolicy {
  kAuto,      // kPlan for plans extracted from a Q/DQ model, else kTensorRT
  kTensorRT,  // FindQdqSites (TensorRT's recipe)
  kPlan,      // SitesFromPlan: exactly where the plan's Q/DQ model had them
};

// "auto" | "tensorrt" | "plan" (the CLI's --placement).
Result<PlacementPolicy> ParsePlacementPolicy(const std::string& text);

struct ApplyPlanOptions {
  PlacementOptions placement;
  PlacementPolicy mode = PlacementPolicy::kAuto;
  // kFakeQuant for the models quantkit runs (simulation folds float weights once; QAT trains them);
  // every writer of a model file sets kInt8 (its --weight-storage default).
  WeightStorage weight_storage = WeightStorage::kFakeQuant;
};

// True when the plan's quantized entries came from a Q/DQ model (sources "qdq:").
bool PlanFromQdqModel(const quant::QuantPlan& plan);

// The sites a plan gets on `graph` (see the formula above); float_nodes never get Q/DQ.
Result<std::vector<QdqSite>> PlanSites(const ir::Graph& graph, const quant::QuantPlan& plan,
                                       const ApplyPlanOptions& options);

// Writes each of plan.initializers into the model (ApplyPlan's first step; alone, it gives the
// float model the plan's stages computed with). Fails before mutating when a name is not a float
// initializer some node reads (a model rewritten since, e.g. BatchNormalization folded: apply
// the overrides first) or the dims differ.
Status ApplyInitializerOverrides(const quant::QuantPlan& plan, ir::Model* model);

// PlanSites + weight scales + InsertQdq, reporting what InsertQdq reports. `*plan` (which must
// outlive the pass) gains the weight entries it lacked.
class ApplyPlan final : public Pass {
 public:
  ApplyPlan(quant::QuantPlan* plan, const ApplyPlanOptions& options)
      : plan_(plan), options_(options) {}
  const char* Name() const override { return "apply_plan"; }
  Status Run(ir::Model& model, PassReport* report) const override;

 private:
  quant::QuantPlan* plan_;
  ApplyPlanOptions options_;
};

}  // namespace quantkit::passes
