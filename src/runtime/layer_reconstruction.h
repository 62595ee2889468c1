// Per-layer weight optimisation from cached activations, label-free (ATen-free header): the
// numerics of the PTQ stages AdaRound and SeqMSE (pipelines/ptq/stages.h drives them layer by
// layer). Until src/train/ exists (issue 28) the ATen loops live here, beside the QAT trainer.
//
// A layer block is a small model: its one graph input `input` feeds a weighted node (Conv,
// ConvTranspose, Gemm, MatMul) whose float initializer `weight` is optimised, followed by the
// elementwise activations that only it feeds (BatchNormalization, Relu, Clip, ...), so that the
// error is measured where the next layer reads it. The block runs on the interpreter (training mode
// for AdaRound: autograd through every op kernel), on runtime::DefaultDevice().
//
// Weights are symmetric int8 on the plan's grid:  q = clamp(round(w / s[c]), -128, 127),  w_q =
// s[c] q.
//
// AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training Quantization"):
//   q = clamp(floor(w / s) + h(V), -128, 127),  h(V) = clamp(sigmoid(V) (zeta - gamma) + gamma, 0,
//   1), zeta = 1.1, gamma = -0.1, V initialised so that h(V) = w/s - floor(w/s) (the soft weight
//   starts at w). loss = E[ sum over output channels of (block(x_q; w_soft) - y)^2 ]
//          + reg * sum over weights of (1 - |2 h(V) - 1|^beta)     (after a warm start with reg =
//          0)
//   beta decays from beta_start to beta_end by a cosine over the iterations after the warm start.
//   Adam on V; each iteration takes one cached run batch, drawn by a seeded std::mt19937_64.
//   Result: q = floor(w/s) + [V >= 0]. If that reconstructs the cached data worse than
//   round-to-nearest, nearest is kept (said in the outcome).
//
// SeqMSE (as aimet-onnx's apply_seq_mse): per output channel, the clipping amax among the
// candidates amax0 * k / K (k = 1..K) whose fake-quantized weights minimise the channel's squared
// output error  sum (block(x_q; fq(w, amax_k / 127)) - block(x_q; w))^2  over the cached data
// (inputs with the quantized prefix on both sides: aimet's "symqt"). Ties keep the larger amax.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::runtime {

struct LayerBlock {
  std::shared_ptr<const ir::Model> model;  // one graph input, the first output is the block's
  std::string input;                       // the graph input fed with cached activations
  std::string weight;                      // float initializer of the weighted node
  std::vector<float> scale;                // the weight's grid: 1 (per tensor) or one per channel
  int64_t axis = -1;                       // per-channel axis of `weight` (-1: per tensor)
  int64_t output_channel_dim = 1;  // the block output's channel dim (Conv: 1, Gemm/MatMul: -1)
};

// AdaRound's hyper-parameters (defaults: AIMET's, but 2000 iterations; pipelines/ptq/stages.h
// range-checks them).
struct AdaRoundParams {
  int64_t iterations = 2000;
  double reg = 0.01;         // weight of the rounding regulariser
  double beta_start = 20.0;  // the regulariser's exponent, annealed
  double beta_end = 2.0;
  double warm_start = 0.2;  // share of the iterations without the regulariser
  double lr = 1e-3;         // Adam's learning rate on V
  uint64_t seed = 0;
};

struct AdaRoundOutcome {
  ir::Tensor weight;        // s * q, float32, the weight's dims
  double loss_nearest = 0;  // reconstruction loss over every cached batch, round to nearest
  double loss_adaround =
      0;                // the same with the learned rounding (the kept one's when nearest wins)
  int64_t changed = 0;  // weights rounded the other way than nearest
  bool kept_nearest = false;  // the learned rounding was not better on the cached data
};

// `inputs[i]` (the block input with the quantized prefix) and `targets[i]` (the FP32 block output)
// are the cached run batches. `on_iteration(i)` is called after each iteration (progress).
Result<AdaRoundOutcome> AdaRoundLayer(const LayerBlock& block,
                                      const std::vector<ir::Tensor>& inputs,
                                      const std::vector<ir::Tensor>& targets,
                                      const AdaRoundParams& params,
                                      const std::function<void(int64_t)>& on_iteration = nullptr);

struct SeqMseParams {
  int64_t candidates = 20;
};

struct SeqMseOutcome {
  std::vector<float> amax;  // per channel (size of block.scale), chosen among the candidates
  ir::Tensor weight;        // the weights fake-quantized on the chosen grid (s * q)
  double loss_before = 0;   // output error of the starting grid (block.scale)
  double loss_after = 0;
  int64_t clipped_channels = 0;  // channels whose amax went below the starting one
};

// `amax0`: the starting per-channel amax (block.scale * 127 for max-calibrated weights).
Result<SeqMseOutcome> SeqMseLayer(const LayerBlock& block, const std::vector<float>& amax0,
                                  const std::vector<ir::Tensor>& inputs,
                                  const SeqMseParams& params);

struct BiasCorrectionOutcome {
  ir::Tensor bias;           // the corrected bias: float32, the bias's dims
  std::vector<float> shift;  // what was added, per output channel
  double error_before = 0;   // mean squared error of the quantized layer output vs the FP32 one
  double error_after = 0;    // the same with the corrected bias, on the same batches
  int64_t non_finite = 0;    // output positions left out: NaN/Inf in either output (bad samples)
};

// Empirical bias correction (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization
// and Bias Correction", the empirical variant; aimet's bias correction): per output channel, the
// mean of the FP32 layer output on `fp32_inputs` minus the mean of the quantized layer's output on
// `quantized_inputs` (the same samples with the quantized prefix) is added to the bias, so the
// quantized layer's expected output is the FP32 one's on these samples. block.model's output is the
// layer's own output (before any activation: a shift is only linear there); `bias` names its bias
// initializer, one value per output channel. The quantized weight: `weight` (a previous stage's,
// already on the grid) or block.weight's initializer, fake-quantized on block.scale.
Result<BiasCorrectionOutcome> BiasCorrectionLayer(const LayerBlock& block, const std::string& bias,
                                                  const std::vector<ir::Tensor>& fp32_inputs,
                                                  const std::vector<ir::Tensor>& quantized_inputs,
                                                  const ir::Tensor* weight = nullptr);

}  // namespace quantkit::runtime
