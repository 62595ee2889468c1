// FakeQuantize for training graphs (see training_ops.h for the math).
#include "runtime/training_ops.h"

#include <fmt/ranges.h>

#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

namespace quantkit::runtime {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Symmetric int8, zero point 0: the only format TensorRT's explicit quantization takes.
constexpr double kQmin = -128.0;
constexpr double kQmax = 127.0;

// `scale` arrives already shaped to broadcast against x ([1, C, 1, 1] or a scalar), so the
// autograd of the reshape (done by the caller) maps its gradient back to the parameter.
struct FakeQuantFn : public torch::autograd::Function<FakeQuantFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& scale,
                            bool lsq, double grad_factor) {
    at::Tensor xs = x / scale;
    at::Tensor r = at::round(xs);  // half to even (nearbyint), as QuantizeLinear
    at::Tensor inside = at::logical_and(r >= kQmin, r <= kQmax);
    at::Tensor q = at::clamp(r, kQmin, kQmax);
    at::Tensor y = q * scale;
    if (lsq) {
      // d(q*s)/ds with q held: q - xs inside the range, the clamp bound outside.
      at::Tensor dyds = at::where(inside, q - xs, q);
      ctx->save_for_backward({inside, dyds});
      ctx->saved_data["grad_factor"] = grad_factor;
    } else {
      ctx->save_for_backward({inside});
    }
    ctx->saved_data["lsq"] = lsq;
    ctx->saved_data["scale_sizes"] = scale.sizes().vec();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& g = grads[0];
    at::Tensor dx = g * saved[0];
    at::Tensor ds;
    if (ctx->saved_data["lsq"].toBool()) {
      const std::vector<int64_t> sizes = ctx->saved_data["scale_sizes"].toIntVector();
      ds = at::sum_to(g * saved[1], sizes) * ctx->saved_data["grad_factor"].toDouble();
    }
    return {dx, ds, at::Tensor(), at::Tensor()};
  }
};

// [C] -> [1, .., C, .., 1] so it broadcasts along `axis` of a rank-`rank` tensor.
at::Tensor AlongAxis(const at::Tensor& v, int64_t axis, int64_t rank) {
  if (axis < 0 || v.numel() == 1) return v.reshape({});
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = v.numel();
  return v.reshape(shape);
}

Result<KernelPtr> MakeFakeQuantize(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", -1);
  const bool lsq = init.node.GetInt("lsq", 0) != 0;
  if (lsq && !init.HasInput(1)) {
    return init.Error(StatusCode::kInvalidModel, "lsq=1 needs a scale input");
  }
  return MakeKernel([axis, lsq](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    QK_KERNEL_CHECK(x.scalar_type() == at::kFloat, "FakeQuantize takes float32, got {}",
                    c10::toString(x.scalar_type()));
    const int64_t a = axis < 0 ? -1 : NormAxis(axis, x.dim());
    at::Tensor scale = c.has(1) ? c.in(1) : WeightScalesFrom(x, a);
    QK_KERNEL_CHECK(scale.numel() == 1 || (a >= 0 && scale.numel() == x.size(a)),
                    "scale has {} elements for axis {} of a tensor of shape [{}]", scale.numel(),
                    axis, fmt::join(x.sizes(), ","));
    return std::vector<at::Tensor>{FakeQuantizeSymmetricInt8(x, scale, a, lsq)};
  });
}

}  // namespace

at::Tensor WeightScalesFrom(const at::Tensor& x, int64_t axis) {
  at::NoGradGuard no_grad;  // the recomputed scale is a function of the weights, not a parameter
  at::Tensor amax;
  if (axis < 0) {
    amax = x.detach().abs().amax();
  } else {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d != axis) dims.push_back(d);
    }
    amax = dims.empty() ? x.detach().abs() : x.detach().abs().amax(dims);
  }
  at::Tensor scale = amax / 127.0f;  // float32 division, as quant::ScaleFromAmax
  // Zero and denormal scales become 1, as quant::WeightScalesFromAmax.
  return at::where(scale >= std::numeric_limits<float>::min(), scale, at::ones_like(scale));
}

at::Tensor FakeQuantizeSymmetricInt8(const at::Tensor& x, const at::Tensor& scale, int64_t axis,
                                     bool lsq) {
  const at::Tensor s = AlongAxis(scale, axis, x.dim());
  const int64_t per_sample = x.dim() > 0 && x.size(0) > 0 ? x.numel() / x.size(0) : x.numel();
  const double grad_factor =
      1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(per_sample, 1)) * kQmax);
  return FakeQuantFn::apply(x, s, lsq, grad_factor);
}

KernelFactory FindTrainingKernel(const std::string& domain, const std::string& op_type) {
  if (domain == kTrainingDomain && op_type == "FakeQuantize") return &MakeFakeQuantize;
  return nullptr;
}

}  // namespace quantkit::runtime
