// What a PTQ stage's Run function gets (pipelines/ptq/stages.h), shared by the stage files.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/layer_cache.h"
#include "pipelines/ptq/stages.h"

namespace quantkit::pipelines::ptq {

struct Context {
  const LoadedModel& model;
  const CalibrationSites& sites;
  const std::vector<data::Batch>& batches;  // the stages' samples, in run batches
  const PtqOptions& options;
  quant::QuantPlan* plan;
};

// One layer as a stage sees it during a sweep.
struct LayerStep {
  const analysis::PtqLayer& layer;
  analysis::LayerInputCache::LayerInputs inputs;  // FP32 and quantized-prefix inputs, per run batch
  std::shared_ptr<const ir::Model> block;         // the layer's block (analysis::ExtractLayerBlock)
  const quant::TensorQuant& weight;               // the plan's weight entry as it is now
};

// Walks the layers in topological order with a fresh LayerInputCache (the quantized prefix follows
// the plan as `fn` edits it), showing a progress bar of `units_per_layer` units per layer.
// `report->layers` counts the layers walked; the cache's peak is added to `*peak_bytes`.
Status ForEachLayer(
    Context& ctx, const std::string& label, int64_t units_per_layer, const char* unit,
    const std::function<Status(LayerStep&, const std::function<void(int64_t)>&)>& fn,
    PtqStageReport* report, int64_t* peak_bytes);

// Runs `block` on each batch of `inputs` (its FP32 weights): the stage's reconstruction target.
Result<std::vector<ir::Tensor>> RunBlock(const ir::Model& block,
                                         const std::vector<ir::Tensor>& inputs);

Status RunSeqMse(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report,
                 int64_t* peak_bytes);
Status RunAdaRound(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report,
                   int64_t* peak_bytes);
// SmoothQuant (ptq_smoothquant.cc): smooths the model, rebuilds *ctx.plan from statistics of the
// smoothed model (its weights in plan.initializers) and returns that model and its sites, which the
// stages after it must use as their FP32 model; leaves *result empty when it changed nothing.
struct SmoothResult {
  LoadedModel model;
  CalibrationSites sites;
};
Status RunSmoothQuant(const PtqStageSpec& spec, Context& ctx, const PtqData& data,
                      PtqStageReport* report, std::optional<SmoothResult>* result);
Status RunBiasCorrection(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report,
                         int64_t* peak_bytes);

}  // namespace quantkit::pipelines::ptq
