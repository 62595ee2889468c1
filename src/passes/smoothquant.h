// SmoothQuant's graph side (Xiao et al. 2023; the `smoothquant` PTQ stage, pipelines/ptq/stages.h):
// where a per-input-channel scale s can move from an activation X into the weights that read it,
// and the folding itself. For layers Y_k = X W_k reading the same X (input channel j):
//
//   s_j = max|X_j|^alpha / max_k max|W_k[j, :]|^(1 - alpha)     (1 when either max is 0; clamped)
//   X'  = X / s     folded into X's producer: LayerNormalization (scale, bias), BatchNormalization
//                   (scale, B), Conv / Gemm / MatMul with initializer weights (their output
//                   channels and bias), through positively homogeneous ops between them (Relu,
//                   LeakyRelu, PRelu, MaxPool, Identity: f(x / s) = f(x) / s for s > 0); or an
//                   affine with constant operands, Mul(h, a) (a / s: h is untouched) and
//                   Add(y, b) (b / s, and y's producer folded the same way): the learnable affine
//                   blocks of PP-LCNetV3 (PP-OCRv4), x * a + b after each activation, whose
//                   scalar a and b become one value per channel
//   W_k' = diag(s) W_k   the weight's input-channel rows (MatMul axis 0, Gemm 0 or 1 by transB,
//                   Conv the kernel's axis 1; a depthwise Conv's kernels, axis 0)
//
// so X' W_k' = X W_k: the float model computes the same function, while X' has flatter channels
// (easier to quantize per tensor) and W_k' absorbs the outliers (quantized per output channel).
// No node is added: only initializers change, which is what a PTQ stage may change
// (plan.initializers). A tensor between the producer and X must feed only the next op of that
// chain; X itself only the smoothed layers (and Shape, which ignores values). Anything else is a
// SmoothSkip with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// An initializer and the axis along which its slices are scaled. `expand` non-empty: the
// initializer holds one value (an affine's scalar) and is first broadcast to these dims, one slice
// per channel along `axis`.
struct AxisEdit {
  std::string initializer;
  int64_t axis = 0;
  std::vector<int64_t> expand;
};

struct SmoothGroup {
  std::string activation;     // X, as the plan names it
  int64_t channel_axis = -1;  // X's channel axis: 1 (Conv layout) or -1 (last)
  int64_t channels = 0;
  std::vector<std::string> layers;  // the consumer nodes (names, for reports)
  std::vector<AxisEdit> weights;    // multiplied by s: each layer's weight, input-channel axis
  std::string producer;             // the node 1/s is folded into ("op 'name'")
  std::vector<AxisEdit> folds;      // divided by s: the producer's per-channel initializers
};

struct SmoothSkip {
  std::string node, reason;
};

// Every group of the main graph in topological order of its first layer, for the layers
// (MatMul, Gemm, Conv with group 1 or depthwise, reading X as the data input, with a float
// initializer weight of their own that `plan` quantizes) whose X the plan quantizes. The rest are
// listed in `skipped`.
Result<std::vector<SmoothGroup>> FindSmoothGroups(const ir::Model& model,
                                                  const quant::QuantPlan& plan,
                                                  std::vector<SmoothSkip>* skipped);

// Bounds on s: the scale never divides a channel by more than this (SmoothQuant clamps at 1e-5).
inline constexpr float kMinSmoothScale = 1e-5f;
inline constexpr float kMaxSmoothScale = 1e5f;

// s_j as above, per channel; 1 where act_max or weight_max is 0.
std::vector<float> SmoothingScales(const std::vector<float>& act_max,
                                   const std::vector<float>& weight_max, double alpha);

// max |t| per slice along `axis` (negative: from the end). t is float32.
std::vector<float> ChannelAbsMax(const ir::Tensor& t, int64_t axis);

// The group's max|W_j| over all its weights, read from `edits` where present, else from the model.
Result<std::vector<float>> GroupWeightMax(const ir::Model& model, const SmoothGroup& group,
                                          const std::map<std::string, ir::Tensor>& edits);

// Multiplies the group's weights by s and divides its folds by s, in `edits` (an initializer not
// yet there is copied from the model first), so later groups see earlier edits.
Status ApplySmoothing(const ir::Model& model, const SmoothGroup& group, const std::vector<float>& s,
                      std::map<std::string, ir::Tensor>* edits);

}  // namespace quantkit::passes
