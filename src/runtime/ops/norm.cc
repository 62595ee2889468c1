// Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, LpNormalization, MeanVarianceNormalization.
#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// Shape [1, C, 1, ...] for a per-channel vector against a rank-`rank` tensor.
at::Tensor PerChannel(const at::Tensor& v, int64_t rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = -1;
  return v.reshape(shape);
}

// BatchNormalization. Inference: y = scale * (x - mean) / sqrt(var + eps) + B. With
// training_mode=1 (opset 14+) the batch statistics are used and the running statistics are
// updated: running = momentum * running + (1 - momentum) * batch.
Result<KernelPtr> MakeBatchNorm(const KernelInit& init) {
  const double eps = init.node.GetFloat("epsilon", 1e-5f);
  const double momentum = init.node.GetFloat("momentum", 0.9f);
  const bool training = init.node.GetInt("training_mode", 0) != 0;
  if (init.opset < 6 && init.node.GetInt("is_test", 0) == 0 && init.node.num_outputs() > 1) {
    return init.Error(StatusCode::kUnsupported, "training-mode BatchNormalization before opset 6");
  }
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t r = x.dim();
    if (!training) {
      at::Tensor inv = at::rsqrt(c.in(4) + eps) * c.in(1);
      return Out{(x - PerChannel(c.in(3), r)) * PerChannel(inv, r) + PerChannel(c.in(2), r)};
    }
    std::vector<int64_t> dims = {0};
    for (int64_t i = 2; i < r; ++i) dims.push_back(i);
    at::Tensor mean = at::mean(x, dims);
    at::Tensor var = at::var(x, dims, /*unbiased=*/false);
    at::Tensor y = (x - PerChannel(mean, r)) * PerChannel(at::rsqrt(var + eps) * c.in(1), r) +
                   PerChannel(c.in(2), r);
    Out out{y};
    if (c.num_outputs() > 1) out.push_back(c.in(3) * momentum + mean * (1 - momentum));
    if (c.num_outputs() > 2) out.push_back(c.in(4) * momentum + var * (1 - momentum));
    return out;
  });
}

Result<KernelPtr> MakeInstanceNorm(const KernelInit& init) {
  const double eps = init.node.GetFloat("epsilon", 1e-5f);
  return MakeKernel([eps](KernelContext& c) {
    return Out{at::instance_norm(c.in(0), c.in(1), c.in(2), {}, {}, /*use_input_stats=*/true, 0.0,
                                 eps,
                                 /*cudnn_enabled=*/false)};
  });
}

// LayerNormalization (17): normalise over dims [axis, rank); outputs Y, Mean, InvStdDev (the
// statistics keep the reduced dims as 1).
Result<KernelPtr> MakeLayerNorm(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", -1);
  const double eps = init.node.GetFloat("epsilon", 1e-5f);
  return MakeKernel([axis, eps](KernelContext& c) {
    const at::Tensor& x0 = c.in(0);
    const int64_t a = NormAxis(axis, x0.dim());
    // stash_type=1: statistics in float even for half inputs.
    at::Tensor x = at::isFloatingType(x0.scalar_type()) && x0.scalar_type() != at::kDouble
                       ? x0.to(at::kFloat)
                       : x0;
    std::vector<int64_t> dims;
    for (int64_t i = a; i < x.dim(); ++i) dims.push_back(i);
    at::Tensor mean = at::mean(x, dims, true);
    at::Tensor inv = at::rsqrt(at::var(x, dims, /*unbiased=*/false, true) + eps);
    at::Tensor y = (x - mean) * inv * c.in(1);
    if (c.has(2)) y = y + c.in(2);
    return Out{y.to(x0.scalar_type()), mean, inv};
  });
}

// GroupNormalization: statistics per (N, group); scale/bias are per group at opset 18 and per
// channel from opset 21.
Result<KernelPtr> MakeGroupNorm(const KernelInit& init) {
  const int64_t groups = init.node.GetInt("num_groups", 0);
  const double eps = init.node.GetFloat("epsilon", 1e-5f);
  const bool per_channel = init.opset >= 21;
  if (groups <= 0) return init.Error(StatusCode::kInvalidModel, "num_groups must be positive");
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t n = x.size(0), ch = x.size(1);
    QK_KERNEL_CHECK(ch % groups == 0, "channels {} not divisible by num_groups {}", ch, groups);
    at::Tensor g = x.reshape({n, groups, -1});
    at::Tensor mean = at::mean(g, {2}, true);
    at::Tensor var = at::var(g, {2}, false, true);
    at::Tensor y = ((g - mean) * at::rsqrt(var + eps)).reshape(x.sizes());
    at::Tensor scale = c.in(1), bias = c.in(2);
    if (!per_channel && scale.numel() == groups && ch != groups) {
      scale = scale.repeat_interleave(ch / groups);
      bias = bias.repeat_interleave(ch / groups);
    }
    return Out{y * PerChannel(scale, x.dim()) + PerChannel(bias, x.dim())};
  });
}

Result<KernelPtr> MakeLpNorm(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", -1);
  const int64_t p = init.node.GetInt("p", 2);
  if (p != 1 && p != 2) return init.Error(StatusCode::kInvalidModel, "p must be 1 or 2, got {}", p);
  return MakeKernel([axis, p](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t a = NormAxis(axis, x.dim());
    at::Tensor norm = p == 1 ? at::sum(at::abs(x), {a}, true) : at::sqrt(at::sum(x * x, {a}, true));
    return Out{x / norm};
  });
}

Result<KernelPtr> MakeMvn(const KernelInit& init) {
  const std::vector<int64_t> axes = init.node.GetInts("axes", {0, 2, 3});
  return MakeKernel([axes](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor mean = at::mean(x, axes, true);
    at::Tensor var = at::mean(x * x, axes, true) - mean * mean;
    return Out{(x - mean) / (at::sqrt(var) + 1e-9)};
  });
}

}  // namespace

void AppendNormKernels(KernelTable& t) {
  t.push_back({"", "BatchNormalization", 1, kLatestOpset, MakeBatchNorm});
  t.push_back({"", "InstanceNormalization", 1, kLatestOpset, MakeInstanceNorm});
  t.push_back({"", "LayerNormalization", 17, kLatestOpset, MakeLayerNorm});
  t.push_back({"", "GroupNormalization", 18, kLatestOpset, MakeGroupNorm});
  t.push_back({"", "LpNormalization", 1, kLatestOpset, MakeLpNorm});
  t.push_back({"", "MeanVarianceNormalization", 9, kLatestOpset, MakeMvn});
}

}  // namespace quantkit::runtime
