// The per-layer stages: SeqMSE (weight ranges) and AdaRound (weight rounding). Each walks the
// layers with the quantized prefix (ptq::ForEachLayer) and writes its result into the plan before
// the next layer's inputs are computed, so later layers adapt to earlier ones.
#include <fmt/format.h>

#include "common/check.h"
#include "pipelines/ptq_stage_internal.h"
#include "quant/weight_scales.h"
#include "runtime/layer_reconstruction.h"

namespace quantkit::pipelines::ptq {
namespace {

runtime::LayerBlock BlockOf(const LayerStep& step) {
  runtime::LayerBlock block;
  block.model = step.block;
  block.input = step.layer.data_input;
  block.weight = step.layer.weight;
  block.scale = step.weight.scale;
  block.axis = step.weight.per_channel() ? step.weight.axis : -1;
  block.output_channel_dim = step.layer.output_channel_dim;
  return block;
}

std::string Name(const analysis::PtqLayer& layer) { return layer.node.empty() ? layer.output : layer.node; }

}  // namespace

Status RunSeqMse(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report, int64_t* peak_bytes) {
  runtime::SeqMseParams params;
  params.candidates = static_cast<int64_t>(spec.Get("candidates"));
  auto fn = [&](LayerStep& step, const std::function<void(int64_t)>&) -> Status {
    const runtime::LayerBlock block = BlockOf(step);
    std::vector<float> amax0 = step.weight.amax;
    if (amax0.size() != step.weight.scale.size()) {
      amax0.clear();
      for (float s : step.weight.scale) amax0.push_back(quant::AmaxFromScale(s));
    }
    if (step.layer.op_type == "ConvTranspose" && step.weight.scale.size() > 1) {
      // Its per-channel axis is the weight's second; grouped ones have more output channels than scales.
      const ir::Value* w = step.block->graph->FindValue(step.layer.weight);
      const ir::Node* n = w ? w->uses().at(0).node : nullptr;
      if (n && n->GetInt("group", 1) != 1) {
        report->lines.push_back(fmt::format("{}: skipped, grouped ConvTranspose", Name(step.layer)));
        ++report->unchanged;
        return Status::Ok();
      }
    }
    QK_ASSIGN_OR_RETURN(runtime::SeqMseOutcome o, runtime::SeqMseLayer(block, amax0, step.inputs.quantized, params));
    report->loss_before += o.loss_before;
    report->loss_after += o.loss_after;
    report->lines.push_back(fmt::format("{}: {} of {} channels clipped, output error {:.4g} -> {:.4g}", Name(step.layer),
                                        o.clipped_channels, o.amax.size(), o.loss_before, o.loss_after));
    if (o.clipped_channels == 0) {
      ++report->unchanged;
      return Status::Ok();
    }
    const int64_t axis = step.weight.per_channel() ? step.weight.axis : -1;
    quant::TensorQuant& entry = ctx.plan->SetScale(step.layer.weight, quant::WeightScalesFromAmax(o.amax), axis,
                                                   quant::TensorRole::kWeight, "seqmse");
    entry.amax = o.amax;
    // The clipped weights themselves too: the float model written for the TensorRT cache then
    // gives TensorRT's own max-based weight scales exactly this grid.
    ctx.plan->initializers[step.layer.weight] = {o.weight, "seqmse"};
    return Status::Ok();
  };
  return ForEachLayer(ctx, "seqmse", 1, "layers", fn, report, peak_bytes);
}

Status RunAdaRound(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report, int64_t* peak_bytes) {
  runtime::AdaRoundParams params;
  params.iterations = static_cast<int64_t>(spec.Get("iterations"));
  params.reg = spec.Get("reg");
  params.beta_start = spec.Get("beta_start");
  params.beta_end = spec.Get("beta_end");
  params.warm_start = spec.Get("warm_start");
  params.lr = spec.Get("lr");
  uint64_t layer_index = 0;
  auto fn = [&](LayerStep& step, const std::function<void(int64_t)>& advance) -> Status {
    const runtime::LayerBlock block = BlockOf(step);
    // The target: the FP32 block on the FP32 inputs (label-free).
    QK_ASSIGN_OR_RETURN(std::vector<ir::Tensor> targets, RunBlock(*step.block, step.inputs.fp32));
    runtime::AdaRoundParams p = params;
    p.seed = ctx.options.seed + layer_index++;  // one stream per layer: reproducible layer by layer
    QK_ASSIGN_OR_RETURN(runtime::AdaRoundOutcome o,
                        runtime::AdaRoundLayer(block, step.inputs.quantized, targets, p, advance));
    report->loss_before += o.loss_nearest;
    report->loss_after += o.loss_adaround;
    report->lines.push_back(fmt::format("{}: {} weights rounded the other way, output error {:.4g} -> {:.4g}{}",
                                        Name(step.layer), o.changed, o.loss_nearest, o.loss_adaround,
                                        o.kept_nearest ? " (nearest kept: not better)" : ""));
    if (o.kept_nearest) {
      ++report->unchanged;
      return Status::Ok();
    }
    ctx.plan->initializers[step.layer.weight] = {o.weight, "adaround"};
    return Status::Ok();
  };
  return ForEachLayer(ctx, "adaround", params.iterations, "steps", fn, report, peak_bytes);
}

}  // namespace quantkit::pipelines::ptq
