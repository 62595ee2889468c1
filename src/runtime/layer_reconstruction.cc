// AdaRound and SeqMSE on one layer block (see layer_reconstruction.h for the math).
#include "runtime/layer_reconstruction.h"

#include <torch/optim.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/check.h"
#include "runtime/aten_bridge.h"
#include "runtime/aten_guard.h"
#include "runtime/device_placement.h"
#include "runtime/interpreter_aten.h"

namespace quantkit::runtime {
namespace {

constexpr double kPi = 3.14159265358979323846;
// The rectified sigmoid's stretch (Nagel et al. 2020, Louizos et al. 2018).
constexpr double kZeta = 1.1;
constexpr double kGamma = -0.1;
constexpr double kQmin = -128.0;
constexpr double kQmax = 127.0;

// The layer block on the device with its weight as a replaceable parameter.
struct BlockRunner {
  std::unique_ptr<Interpreter> interp;
  at::Device device = at::kCPU;
  at::Tensor weight;  // the FP32 weight on the device
  at::Tensor scale;   // shaped to broadcast against the weight
  std::string input, weight_name;
  int64_t channel_dim = 1;

  static Result<BlockRunner> Create(const LayerBlock& block, bool training) {
    BlockRunner r;
    const Device device = DefaultDevice();
    QK_RETURN_IF_ERROR(UseDevice(device));
    r.device = ToAtenDevice(device);
    r.input = block.input;
    r.weight_name = block.weight;
    const ir::Value* w = block.model->graph->FindValue(block.weight);
    QK_RETURN_IF_NOT(w && w->initializer && w->initializer->dtype() == ir::DType::kFloat,
                     StatusCode::kInternal, "layer block: '{}' is not a float initializer",
                     block.weight);
    const std::vector<int64_t>& dims = w->initializer->dims();
    const int64_t channels = block.axis >= 0 && block.axis < static_cast<int64_t>(dims.size())
                                 ? dims[static_cast<size_t>(block.axis)]
                                 : 1;
    QK_RETURN_IF_NOT(static_cast<int64_t>(block.scale.size()) == (block.axis >= 0 ? channels : 1),
                     StatusCode::kInternal, "layer block '{}': {} scales for axis {} of dims {}",
                     block.weight, block.scale.size(), block.axis, dims.size());
    QK_RETURN_IF_ERROR(Guarded("layer block '" + block.weight + "'", [&]() -> Status {
      QK_ASSIGN_OR_RETURN(at::Tensor host, CopyToAten(*w->initializer, block.weight));
      r.weight = host.to(r.device);
      at::Tensor s = at::tensor(block.scale, at::kFloat);
      if (block.axis >= 0) {
        std::vector<int64_t> shape(dims.size(), 1);
        shape[static_cast<size_t>(block.axis)] = channels;
        s = s.reshape(shape);
      } else {
        s = s.reshape({});
      }
      r.scale = s.to(r.device);
      return Status::Ok();
    }));
    InterpreterOptions options;
    options.training = training;
    options.check_finite_inputs = false;
    options.device = device;
    QK_ASSIGN_OR_RETURN(r.interp, Interpreter::Create(block.model, options));
    QK_RETURN_IF_NOT(
        r.interp->input_names().size() == 1 && r.interp->input_names()[0] == block.input,
        StatusCode::kInternal, "layer block '{}' must have the one input '{}'", block.weight,
        block.input);
    r.channel_dim = block.output_channel_dim;
    return r;
  }

  Result<at::Tensor> Run(const at::Tensor& x, const at::Tensor& weight) const {
    const std::vector<std::pair<std::string, at::Tensor>> params{{weight_name, weight}};
    AtenRunOptions options;
    options.parameters = &params;
    QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> outs, RunAten(*interp, {{input, x}}, options));
    QK_RETURN_IF_NOT(!outs.empty() && outs[0].scalar_type() == at::kFloat, StatusCode::kInternal,
                     "layer block '{}' gave no float output", weight_name);
    return outs[0];
  }

  // Squared error summed over the output channels, averaged over everything else.
  at::Tensor Loss(const at::Tensor& out, const at::Tensor& target) const {
    const int64_t dim = channel_dim < 0 ? out.dim() + channel_dim : channel_dim;
    const int64_t channels = out.dim() > dim ? out.size(dim) : 1;
    const double positions =
        static_cast<double>(std::max<int64_t>(out.numel() / std::max<int64_t>(channels, 1), 1));
    return (out - target).pow(2).sum() / positions;
  }

  // Per output channel: squared error summed over everything else ([channels]).
  at::Tensor ChannelErrors(const at::Tensor& out, const at::Tensor& target) const {
    const int64_t dim = channel_dim < 0 ? out.dim() + channel_dim : channel_dim;
    at::Tensor e = (out - target).pow(2);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < e.dim(); ++d) {
      if (d != dim) dims.push_back(d);
    }
    return dims.empty() ? e : e.sum(dims);
  }
};

Result<std::vector<at::Tensor>> OnDevice(const std::vector<ir::Tensor>& tensors,
                                         const at::Device& device, const std::string& what) {
  std::vector<at::Tensor> out;
  for (const ir::Tensor& t : tensors) {
    QK_ASSIGN_OR_RETURN(at::Tensor a, CopyToAten(t, what));
    out.push_back(ToDevice(a, device));
  }
  return out;
}

// The rectified sigmoid h(V).
at::Tensor RectifiedSigmoid(const at::Tensor& v) {
  return at::clamp(at::sigmoid(v) * (kZeta - kGamma) + kGamma, 0.0, 1.0);
}

}  // namespace

Result<AdaRoundOutcome> AdaRoundLayer(const LayerBlock& block,
                                      const std::vector<ir::Tensor>& inputs,
                                      const std::vector<ir::Tensor>& targets,
                                      const AdaRoundParams& params,
                                      const std::function<void(int64_t)>& on_iteration) {
  QK_RETURN_IF_NOT(!inputs.empty() && inputs.size() == targets.size(), StatusCode::kInternal,
                   "adaround '{}': {} input and {} target batches", block.weight, inputs.size(),
                   targets.size());
  QK_ASSIGN_OR_RETURN(BlockRunner runner, BlockRunner::Create(block, /*training=*/true));
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> xs, OnDevice(inputs, runner.device, "cached input"));
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> ys,
                      OnDevice(targets, runner.device, "cached target"));
  AdaRoundOutcome outcome;
  const std::string what = "adaround of '" + block.weight + "'";
  QK_RETURN_IF_ERROR(Guarded(what, [&]() -> Status {
    // Division as QuantizeLinear (x / s, not x * (1 / s)), so nearest rounding is the exported one.
    const at::Tensor ws = runner.weight / runner.scale;
    const at::Tensor floor = at::floor(ws);
    const at::Tensor rest = ws - floor;
    // V with h(V) = rest: sigmoid(V) = (rest - gamma) / (zeta - gamma).
    at::Tensor v =
        (-at::log((kZeta - kGamma) / (rest - kGamma) - 1.0)).detach().set_requires_grad(true);
    torch::optim::Adam adam({v}, torch::optim::AdamOptions(params.lr));
    std::mt19937_64 rng(params.seed);
    const int64_t warm = static_cast<int64_t>(
        std::floor(params.warm_start * static_cast<double>(params.iterations)));
    for (int64_t it = 0; it < params.iterations; ++it) {
      const size_t b = static_cast<size_t>(rng() % xs.size());
      adam.zero_grad();
      const at::Tensor soft = at::clamp(floor + RectifiedSigmoid(v), kQmin, kQmax) * runner.scale;
      QK_ASSIGN_OR_RETURN(at::Tensor out, runner.Run(xs[b], soft));
      at::Tensor loss = runner.Loss(out, ys[b]);
      if (it >= warm) {
        const double rel = static_cast<double>(it - warm) /
                           static_cast<double>(std::max<int64_t>(params.iterations - warm, 1));
        const double beta = params.beta_end + 0.5 * (params.beta_start - params.beta_end) *
                                                  (1.0 + std::cos(rel * kPi));
        loss = loss + params.reg * (1.0 - (2.0 * RectifiedSigmoid(v) - 1.0).abs().pow(beta)).sum();
      }
      loss.backward();
      adam.step();
      if (on_iteration) on_iteration(it);
    }
    at::NoGradGuard no_grad;
    const at::Tensor nearest_q = at::clamp(at::round(ws), kQmin, kQmax);
    const at::Tensor learned_q = at::clamp(floor + (v.detach() >= 0).to(at::kFloat), kQmin, kQmax);
    // The decision on every cached batch: the learned rounding must beat nearest to be kept.
    auto total = [&](const at::Tensor& q) -> Result<double> {
      const at::Tensor w = q * runner.scale;
      double sum = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        QK_ASSIGN_OR_RETURN(at::Tensor out, runner.Run(xs[i], w));
        sum += runner.Loss(out, ys[i]).item<double>();
      }
      return sum / static_cast<double>(xs.size());
    };
    QK_ASSIGN_OR_RETURN(outcome.loss_nearest, total(nearest_q));
    QK_ASSIGN_OR_RETURN(outcome.loss_adaround, total(learned_q));
    outcome.kept_nearest = !(outcome.loss_adaround < outcome.loss_nearest);
    const at::Tensor q = outcome.kept_nearest ? nearest_q : learned_q;
    outcome.changed = outcome.kept_nearest ? 0 : (learned_q != nearest_q).sum().item<int64_t>();
    if (outcome.kept_nearest) outcome.loss_adaround = outcome.loss_nearest;
    QK_ASSIGN_OR_RETURN(outcome.weight, ToIrTensor((q * runner.scale).contiguous().cpu(), what));
    return Status::Ok();
  }));
  return outcome;
}

Result<SeqMseOutcome> SeqMseLayer(const LayerBlock& block, const std::vector<float>& amax0,
                                  const std::vector<ir::Tensor>& inputs,
                                  const SeqMseParams& params) {
  QK_RETURN_IF_NOT(!inputs.empty() && amax0.size() == block.scale.size() && params.candidates > 0,
                   StatusCode::kInternal, "seqmse '{}': {} batches, {} amax for {} scales",
                   block.weight, inputs.size(), amax0.size(), block.scale.size());
  QK_ASSIGN_OR_RETURN(BlockRunner runner, BlockRunner::Create(block, /*training=*/false));
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> xs, OnDevice(inputs, runner.device, "cached input"));
  SeqMseOutcome outcome;
  const std::string what = "seqmse of '" + block.weight + "'";
  QK_RETURN_IF_ERROR(Guarded(what, [&]() -> Status {
    at::InferenceMode inference;
    const at::Tensor amax =
        at::tensor(amax0, at::kFloat).to(runner.device).reshape(runner.scale.sizes());
    // Fake quantization on the grid of `a` (per channel): s = a / 127, as quant::ScaleFromAmax;
    // a channel whose amax gives no normal scale stays on its starting grid.
    auto grid = [&](const at::Tensor& a) {
      const at::Tensor s = a / 127.0f;
      return at::where(s >= std::numeric_limits<float>::min(), s, runner.scale);
    };
    auto quantized = [&](const at::Tensor& s) {
      return at::clamp(at::round(runner.weight / s), kQmin, kQmax) * s;
    };
    std::vector<at::Tensor> refs;
    for (const at::Tensor& x : xs) {
      QK_ASSIGN_OR_RETURN(at::Tensor y, runner.Run(x, runner.weight));
      refs.push_back(y);
    }
    auto channel_errors = [&](const at::Tensor& w) -> Result<at::Tensor> {
      at::Tensor sum;
      for (size_t i = 0; i < xs.size(); ++i) {
        QK_ASSIGN_OR_RETURN(at::Tensor out, runner.Run(xs[i], w));
        at::Tensor e = runner.ChannelErrors(out, refs[i]).to(at::kDouble);
        sum = sum.defined() ? sum + e : e;
      }
      // Per-tensor grid: one error for the whole output.
      return amax0.size() == 1 ? sum.sum().reshape({1}) : sum;
    };
    const int64_t channels = static_cast<int64_t>(amax0.size());
    QK_ASSIGN_OR_RETURN(at::Tensor start_err, channel_errors(quantized(runner.scale)));
    QK_RETURN_IF_NOT(
        start_err.numel() == channels, StatusCode::kInvalidArgument,
        "seqmse: layer '{}' has {} output channels in its block output, its weight {} scales",
        block.weight, start_err.numel(), channels);
    at::Tensor best_err = at::full({channels}, std::numeric_limits<double>::infinity(), at::kDouble)
                              .to(runner.device);
    at::Tensor best_amax = amax.reshape({channels}).clone();
    // Largest first, replaced only on a strictly smaller error: ties keep the larger amax.
    for (int64_t k = params.candidates; k >= 1; --k) {
      const at::Tensor a = amax * static_cast<float>(static_cast<double>(k) /
                                                     static_cast<double>(params.candidates));
      QK_ASSIGN_OR_RETURN(at::Tensor err, channel_errors(quantized(grid(a))));
      const at::Tensor better = err < best_err;
      best_err = at::where(better, err, best_err);
      best_amax = at::where(better, a.reshape({channels}), best_amax);
    }
    const at::Tensor chosen = best_amax.reshape(runner.scale.sizes());
    const at::Tensor w = quantized(grid(chosen));
    outcome.loss_before = start_err.sum().item<double>();
    outcome.loss_after = best_err.sum().item<double>();
    const at::Tensor host = best_amax.cpu().contiguous();
    outcome.amax.assign(host.data_ptr<float>(), host.data_ptr<float>() + channels);
    for (int64_t c = 0; c < channels; ++c)
      outcome.clipped_channels +=
          outcome.amax[static_cast<size_t>(c)] < amax0[static_cast<size_t>(c)];
    QK_ASSIGN_OR_RETURN(outcome.weight, ToIrTensor(w.contiguous().cpu(), what));
    return Status::Ok();
  }));
  return outcome;
}

Result<BiasCorrectionOutcome> BiasCorrectionLayer(const LayerBlock& block, const std::string& bias,
                                                  const std::vector<ir::Tensor>& fp32_inputs,
                                                  const std::vector<ir::Tensor>& quantized_inputs,
                                                  const ir::Tensor* weight) {
  QK_RETURN_IF_NOT(!fp32_inputs.empty() && fp32_inputs.size() == quantized_inputs.size(),
                   StatusCode::kInternal, "bias correction '{}': {} FP32 and {} quantized batches",
                   block.weight, fp32_inputs.size(), quantized_inputs.size());
  const ir::Value* b = block.model->graph->FindValue(bias);
  QK_RETURN_IF_NOT(b && b->initializer && b->initializer->dtype() == ir::DType::kFloat,
                   StatusCode::kInternal, "bias correction: '{}' is not a float initializer", bias);
  QK_ASSIGN_OR_RETURN(BlockRunner runner, BlockRunner::Create(block, /*training=*/false));
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> xf,
                      OnDevice(fp32_inputs, runner.device, "cached input"));
  QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> xq,
                      OnDevice(quantized_inputs, runner.device, "cached input"));
  BiasCorrectionOutcome outcome;
  const std::string what = "bias correction of '" + bias + "'";
  QK_RETURN_IF_ERROR(Guarded(what, [&]() -> Status {
    at::InferenceMode inference;
    at::Tensor w = runner.weight;
    if (weight != nullptr) {
      QK_ASSIGN_OR_RETURN(at::Tensor given, CopyToAten(*weight, block.weight));
      QK_RETURN_IF_NOT(given.sizes() == runner.weight.sizes(), StatusCode::kInternal,
                       "bias correction: the weight given for '{}' has another shape",
                       block.weight);
      w = given.to(at::kFloat).to(runner.device);
    }
    const at::Tensor wq = at::clamp(at::round(w / runner.scale), kQmin, kQmax) * runner.scale;
    // Per channel: the summed difference (double: thousands of positions), then the mean. Only
    // positions where both outputs are finite count: samples holding NaN/Inf (a corrupt pixel)
    // would otherwise make every bias NaN.
    at::Tensor sum, count;
    double elements = 0, before = 0;
    int64_t dim = 0;
    for (size_t i = 0; i < xf.size(); ++i) {
      QK_ASSIGN_OR_RETURN(at::Tensor yf, runner.Run(xf[i], runner.weight));
      QK_ASSIGN_OR_RETURN(at::Tensor yq, runner.Run(xq[i], wq));
      QK_RETURN_IF_NOT(yf.sizes() == yq.sizes() && yf.dim() >= 1, StatusCode::kInternal,
                       "bias correction '{}': outputs of different shapes", block.weight);
      dim = runner.channel_dim < 0 ? yf.dim() + runner.channel_dim : runner.channel_dim;
      QK_RETURN_IF_NOT(
          dim >= 0 && dim < yf.dim() && yf.size(dim) == b->initializer->numel(),
          StatusCode::kInternal, "bias correction '{}': {} output channels, a bias of {} values",
          block.weight, dim >= 0 && dim < yf.dim() ? yf.size(dim) : -1, b->initializer->numel());
      at::Tensor d = (yf - yq).to(at::kDouble);
      const at::Tensor finite = at::isfinite(d);
      const int64_t finite_count = finite.sum().item<int64_t>();
      outcome.non_finite += d.numel() - finite_count;
      d = at::where(finite, d, at::zeros_like(d));
      std::vector<int64_t> others;
      for (int64_t k = 0; k < d.dim(); ++k) {
        if (k != dim) others.push_back(k);
      }
      const at::Tensor finite_d = finite.to(at::kDouble);
      const at::Tensor channel_sum = others.empty() ? d : d.sum(others);
      const at::Tensor channel_count = others.empty() ? finite_d : finite_d.sum(others);
      sum = sum.defined() ? sum + channel_sum : channel_sum;
      count = count.defined() ? count + channel_count : channel_count;
      elements += static_cast<double>(finite_count);
      before += d.pow(2).sum().item<double>();
    }
    // A channel with no finite position keeps its bias.
    const at::Tensor shift =
        at::where(count > 0, sum / count.clamp_min(1), at::zeros_like(sum));  // double
    // Subtracting each channel's mean d_c removes n_c * d_c^2 from that channel's squared error
    // (sum (d - d_c)^2 = sum d^2 - n_c d_c^2), so the corrected error needs no second pass.
    const double after = std::max(0.0, before - (count * shift.pow(2)).sum().item<double>());
    outcome.error_before = elements > 0 ? before / elements : 0.0;
    outcome.error_after = elements > 0 ? after / elements : 0.0;
    const at::Tensor shift_host = shift.to(at::kFloat).cpu().contiguous();
    outcome.shift.assign(shift_host.data_ptr<float>(),
                         shift_host.data_ptr<float>() + shift_host.numel());
    QK_ASSIGN_OR_RETURN(at::Tensor old_bias, CopyToAten(*b->initializer, bias));
    const at::Tensor corrected =
        (old_bias.to(at::kFloat).reshape({-1}) + shift_host).reshape(old_bias.sizes());
    QK_ASSIGN_OR_RETURN(outcome.bias, ToIrTensor(corrected.contiguous(), what));
    return Status::Ok();
  }));
  return outcome;
}

}  // namespace quantkit::runtime
