// The per-layer stages: SeqMSE (weight ranges), AdaRound (weight rounding) and bias correction.
// Each walks the layers with the quantized prefix (ptq::ForEachLayer) and writes its result into
// the plan before the next layer's inputs are computed, so later layers adapt to earlier ones.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/check.h"
#include "pipelines/ptq/stage_internal.h"
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

std::string Name(const analysis::PtqLayer& layer) {
  return layer.node.empty() ? layer.output : layer.node;
}

// The layer's bias as bias correction can change it: a float initializer read by this node only,
// one value per output channel; otherwise why not.
Result<std::string> CorrectableBias(const ir::Model& model, const analysis::PtqLayer& layer) {
  const ir::Value* out = model.graph->FindValue(layer.output);
  const ir::Node* node = out ? out->producer() : nullptr;
  if (node == nullptr) return Status(StatusCode::kNotFound, "no producer");
  if (layer.op_type != "Conv" && layer.op_type != "ConvTranspose" && layer.op_type != "Gemm") {
    return Status(StatusCode::kUnsupported, layer.op_type + " has no bias input");
  }
  const ir::Value* b = node->input(2);
  if (b == nullptr) return Status(StatusCode::kUnsupported, "no bias");
  if (!b->initializer || b->initializer->dtype() != ir::DType::kFloat || b->uses().size() != 1) {
    return Status(StatusCode::kUnsupported, "its bias is not a float initializer of its own");
  }
  if (b->initializer->dims().size() != 1)
    return Status(StatusCode::kUnsupported, "its bias is not one-dimensional");
  if (layer.op_type == "Gemm" && node->GetFloat("beta", 1.0f) != 1.0f) {
    return Status(StatusCode::kUnsupported, "Gemm with beta != 1");
  }
  return b->name();
}

}  // namespace

Status RunSeqMse(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report,
                 int64_t* peak_bytes) {
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
      // Its per-channel axis is the weight's second; grouped ones have more output channels than
      // scales.
      const ir::Value* w = step.block->graph->FindValue(step.layer.weight);
      const ir::Node* n = w ? w->uses().at(0).node : nullptr;
      if (n && n->GetInt("group", 1) != 1) {
        report->lines.push_back(
            fmt::format("{}: skipped, grouped ConvTranspose", Name(step.layer)));
        ++report->unchanged;
        return Status::Ok();
      }
    }
    QK_ASSIGN_OR_RETURN(runtime::SeqMseOutcome o,
                        runtime::SeqMseLayer(block, amax0, step.inputs.quantized, params));
    report->loss_before += o.loss_before;
    report->loss_after += o.loss_after;
    report->lines.push_back(fmt::format(
        "{}: {} of {} channels clipped, output error {:.4g} -> {:.4g}", Name(step.layer),
        o.clipped_channels, o.amax.size(), o.loss_before, o.loss_after));
    if (o.clipped_channels == 0) {
      ++report->unchanged;
      return Status::Ok();
    }
    const int64_t axis = step.weight.per_channel() ? step.weight.axis : -1;
    quant::TensorQuant& entry =
        ctx.plan->SetScale(step.layer.weight, quant::WeightScalesFromAmax(o.amax), axis,
                           quant::TensorRole::kWeight, "seqmse");
    entry.amax = o.amax;
    // The clipped weights themselves too: the float model written for the TensorRT cache then
    // gives TensorRT's own max-based weight scales exactly this grid.
    ctx.plan->initializers[step.layer.weight] = {o.weight, "seqmse"};
    return Status::Ok();
  };
  return ForEachLayer(ctx, "seqmse", 1, "layers", fn, report, peak_bytes);
}

Status RunAdaRound(const PtqStageSpec& spec, Context& ctx, PtqStageReport* report,
                   int64_t* peak_bytes) {
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
    report->lines.push_back(
        fmt::format("{}: {} weights rounded the other way, output error {:.4g} -> {:.4g}{}",
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

Status RunBiasCorrection(const PtqStageSpec&, Context& ctx, PtqStageReport* report,
                         int64_t* peak_bytes) {
  auto fn = [&](LayerStep& step, const std::function<void(int64_t)>&) -> Status {
    const Result<std::string> bias = CorrectableBias(*ctx.model.model, step.layer);
    if (!bias.ok()) {
      report->lines.push_back(
          fmt::format("{}: skipped, {}", Name(step.layer), bias.status().message()));
      ++report->unchanged;
      return Status::Ok();
    }
    // The layer alone, up to its own output: its block may end after an activation, where a
    // shift is no longer linear.
    runtime::LayerBlock block = BlockOf(step);
    if (step.layer.block_output != step.layer.output) {
      QK_ASSIGN_OR_RETURN(ir::Model layer_model,
                          analysis::ExtractSubModel(*ctx.model.model, {step.layer.data_input},
                                                    {step.layer.output}));
      block.model = std::make_shared<const ir::Model>(std::move(layer_model));
      block.output_channel_dim = step.layer.op_type == "Gemm" ? -1 : 1;
    }
    auto replaced = ctx.plan->initializers.find(step.layer.weight);
    const ir::Tensor* weight =
        replaced == ctx.plan->initializers.end() ? nullptr : &replaced->second.value;
    QK_ASSIGN_OR_RETURN(runtime::BiasCorrectionOutcome o,
                        runtime::BiasCorrectionLayer(block, bias.value(), step.inputs.fp32,
                                                     step.inputs.quantized, weight));
    report->loss_before += o.error_before;
    report->loss_after += o.error_after;
    float largest = 0;
    for (float v : o.shift) largest = std::max(largest, std::fabs(v));
    report->lines.push_back(
        fmt::format("{}: bias shifted by up to {:.4g}, output error {:.4g} -> {:.4g}{}",
                    Name(step.layer), largest, o.error_before, o.error_after,
                    o.non_finite > 0 ? fmt::format(" ({} non-finite output values left out: the "
                                                   "samples hold NaN/Inf)",
                                                   o.non_finite)
                                     : std::string()));
    ctx.plan->initializers[bias.value()] = {std::move(o.bias), "bias-correction"};
    return Status::Ok();
  };
  return ForEachLayer(ctx, "bias-correction", 1, "layers", fn, report, peak_bytes);
}

}  // namespace quantkit::pipelines::ptq
