// Elementwise ops: activations, unary math, binary arithmetic/comparison/logic with numpy
// broadcasting, variadic Min/Max/Mean/Sum, Where, Clip, Cast.
//
// ONNX requires both operands of a binary op to share a dtype, so ATen's type promotion never
// changes the result type except where noted (Pow: result has the base's dtype; integer Div
// truncates like C, which ATen spells rounding_mode="trunc").
#include <cmath>
#include <initializer_list>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// A unary op given as a plain function of one tensor.
template <at::Tensor (*Fn)(const at::Tensor&)>
Result<KernelPtr> Unary(const KernelInit&) {
  return MakeKernel([](KernelContext& c) { return Out{Fn(c.in(0))}; });
}

at::Tensor Relu(const at::Tensor& x) { return at::relu(x); }
at::Tensor Sigmoid(const at::Tensor& x) { return at::sigmoid(x); }
at::Tensor Tanh(const at::Tensor& x) { return at::tanh(x); }
at::Tensor Softplus(const at::Tensor& x) { return at::softplus(x); }
at::Tensor Softsign(const at::Tensor& x) { return x / (at::abs(x) + 1); }
at::Tensor Erf(const at::Tensor& x) { return at::erf(x); }
at::Tensor Mish(const at::Tensor& x) { return x * at::tanh(at::softplus(x)); }
at::Tensor Sqrt(const at::Tensor& x) { return at::sqrt(x); }
at::Tensor Exp(const at::Tensor& x) { return at::exp(x); }
at::Tensor Log(const at::Tensor& x) { return at::log(x); }
at::Tensor Abs(const at::Tensor& x) { return at::abs(x); }
at::Tensor Neg(const at::Tensor& x) { return at::neg(x); }
at::Tensor Reciprocal(const at::Tensor& x) { return at::reciprocal(x); }
at::Tensor Floor(const at::Tensor& x) { return at::floor(x); }
at::Tensor Ceil(const at::Tensor& x) { return at::ceil(x); }
at::Tensor Round(const at::Tensor& x) { return at::round(x); }  // half to even, as ONNX
at::Tensor Sign(const at::Tensor& x) { return at::sign(x); }
at::Tensor Not(const at::Tensor& x) { return at::logical_not(x); }
at::Tensor Sin(const at::Tensor& x) { return at::sin(x); }
at::Tensor Cos(const at::Tensor& x) { return at::cos(x); }
at::Tensor Tan(const at::Tensor& x) { return at::tan(x); }
at::Tensor Asin(const at::Tensor& x) { return at::asin(x); }
at::Tensor Acos(const at::Tensor& x) { return at::acos(x); }
at::Tensor Atan(const at::Tensor& x) { return at::atan(x); }
at::Tensor Sinh(const at::Tensor& x) { return at::sinh(x); }
at::Tensor Cosh(const at::Tensor& x) { return at::cosh(x); }
at::Tensor Asinh(const at::Tensor& x) { return at::asinh(x); }
at::Tensor Acosh(const at::Tensor& x) { return at::acosh(x); }
at::Tensor Atanh(const at::Tensor& x) { return at::atanh(x); }
at::Tensor IsNaN(const at::Tensor& x) { return at::isnan(x); }
at::Tensor Identity(const at::Tensor& x) { return x; }
at::Tensor BitwiseNot(const at::Tensor& x) { return at::bitwise_not(x); }

Result<KernelPtr> MakeIsInf(const KernelInit& init) {
  const bool neg = init.node.GetInt("detect_negative", 1) != 0;
  const bool pos = init.node.GetInt("detect_positive", 1) != 0;
  return MakeKernel([neg, pos](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor r = at::zeros(x.sizes(), x.options().dtype(at::kBool));
    if (pos) r = r | at::isposinf(x);
    if (neg) r = r | at::isneginf(x);
    return Out{r};
  });
}

Result<KernelPtr> MakeLeakyRelu(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 0.01f);
  return MakeKernel([alpha](KernelContext& c) { return Out{at::leaky_relu(c.in(0), alpha)}; });
}

// Before opset 7 a 1-D slope of size C applies per channel (axis 1), not to the last axis.
Result<KernelPtr> MakePRelu(const KernelInit& init) {
  const bool legacy = init.opset < 7;
  return MakeKernel([legacy](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor slope = c.in(1);
    if (legacy && slope.dim() == 1 && x.dim() > 2 && slope.numel() == x.size(1)) {
      std::vector<int64_t> shape(x.dim() - 1, 1);
      shape[0] = -1;
      slope = slope.reshape(shape);
    }
    return Out{at::where(x < 0, x * slope, x)};
  });
}

Result<KernelPtr> MakeElu(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 1.0f);
  return MakeKernel([alpha](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    return Out{at::where(x < 0, (at::exp(x) - 1) * alpha, x)};
  });
}

Result<KernelPtr> MakeCelu(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 1.0f);
  return MakeKernel([alpha](KernelContext& c) { return Out{at::celu(c.in(0), alpha)}; });
}

Result<KernelPtr> MakeSelu(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 1.67326319217681884765625f);
  const double gamma = init.node.GetFloat("gamma", 1.05070102214813232421875f);
  return MakeKernel([alpha, gamma](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    return Out{at::where(x > 0, x * gamma, (at::exp(x) - 1) * (alpha * gamma))};
  });
}

Result<KernelPtr> MakeThresholdedRelu(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 1.0f);
  return MakeKernel([alpha](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    return Out{at::where(x > alpha, x, at::zeros_like(x))};
  });
}

Result<KernelPtr> MakeHardSigmoid(const KernelInit& init) {
  const double alpha = init.node.GetFloat("alpha", 0.2f);
  const double beta = init.node.GetFloat("beta", 0.5f);
  return MakeKernel(
      [alpha, beta](KernelContext& c) { return Out{at::clamp(c.in(0) * alpha + beta, 0, 1)}; });
}

Result<KernelPtr> MakeHardSwish(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    return Out{x * at::clamp(x * (1.0 / 6) + 0.5, 0, 1)};
  });
}

Result<KernelPtr> MakeGelu(const KernelInit& init) {
  const std::string approximate = init.node.GetString("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    return init.Error(StatusCode::kInvalidModel, "attribute approximate='{}' must be none or tanh",
                      approximate);
  }
  return MakeKernel(
      [approximate](KernelContext& c) { return Out{at::gelu(c.in(0), approximate)}; });
}

// Clip: bounds are attributes before opset 11, optional inputs from 11.
Result<KernelPtr> MakeClip(const KernelInit& init) {
  if (init.opset < 11) {
    const double lo = init.node.GetFloat("min", -std::numeric_limits<float>::max());
    const double hi = init.node.GetFloat("max", std::numeric_limits<float>::max());
    return MakeKernel([lo, hi](KernelContext& c) { return Out{at::clamp(c.in(0), lo, hi)}; });
  }
  return MakeKernel([](KernelContext& c) {
    at::Tensor x = c.in(0);
    // Both bounds given as scalars (ReLU6 and friends): one pass instead of two, same values
    // (clamp is max then min, NaN propagating, like maximum/minimum; a NaN bound differs, so
    // it takes the general path; at most the sign of a zero result may differ).
    if (c.has(1) && c.has(2) && c.in(1).numel() == 1 && c.in(2).numel() == 1 &&
        x.is_floating_point()) {
      const at::Scalar lo = c.in(1).to(x.scalar_type()).item(),
                       hi = c.in(2).to(x.scalar_type()).item();
      if (!std::isnan(lo.toDouble()) && !std::isnan(hi.toDouble()))
        return Out{at::clamp(x, lo, hi)};
    }
    if (c.has(1)) x = at::maximum(x, c.in(1).to(x.scalar_type()));
    if (c.has(2)) x = at::minimum(x, c.in(2).to(x.scalar_type()));
    return Out{x};
  });
}

// --- binary ---

// Elementwise kernels read no values on the host, so on a GPU interpreter a host operand (a small
// integer tensor kept there for the shape kernels, interpreter.cc's KeepOnHost) joins the device
// of the others: ATen mixes devices only for 0-dim host tensors (nllloss's expanded Equal/Where).
at::Device ElementwiseDevice(std::initializer_list<const at::Tensor*> operands) {
  for (const at::Tensor* t : operands) {
    if (t->defined() && !t->device().is_cpu()) return t->device();
  }
  return at::Device(at::kCPU);
}
at::Tensor On(const at::Tensor& t, at::Device device) {
  return (!t.defined() || t.device() == device || t.dim() == 0) ? t : t.to(device);
}

enum class BinOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kEq,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
  kXor,
  kBitAnd,
  kBitOr,
  kBitXor
};

// Before opset 7, broadcast=1 with `axis` aligns B's dims with A's starting at `axis` (instead
// of numpy's trailing alignment).
at::Tensor LegacyAlign(const at::Tensor& a, const at::Tensor& b, int64_t axis) {
  if (axis < 0) return b;  // no legacy axis (the attribute itself is non-negative here)
  const int64_t ax = axis;
  std::vector<int64_t> shape(ax, 1);
  for (int64_t d : b.sizes()) shape.push_back(d);
  while (static_cast<int64_t>(shape.size()) < a.dim()) shape.push_back(1);
  return b.reshape(shape);
}

template <BinOp op>
Result<KernelPtr> Binary(const KernelInit& init) {
  const bool legacy_axis =
      init.opset < 7 && init.node.GetInt("broadcast", 0) != 0 && init.node.has_attr("axis");
  const int64_t axis = legacy_axis ? init.node.GetInt("axis", 0) : -1;
  return MakeKernel([axis](KernelContext& c) {
    const at::Device device = ElementwiseDevice({&c.in(0), &c.in(1)});
    const at::Tensor a = On(c.in(0), device);
    const at::Tensor b = On(LegacyAlign(a, c.in(1), axis), device);
    switch (op) {
      case BinOp::kAdd:
        return Out{at::add(a, b)};
      case BinOp::kSub:
        return Out{at::sub(a, b)};
      case BinOp::kMul:
        return Out{at::mul(a, b)};
      case BinOp::kDiv:
        if (at::isIntegralType(a.scalar_type(), /*includeBool=*/true)) {
          return Out{at::div(a, b, "trunc")};
        }
        return Out{at::div(a, b)};
      case BinOp::kPow: {
        // The result keeps the base's dtype; integer powers are computed exactly in int64/double.
        if (at::isIntegralType(a.scalar_type(), true)) {
          if (at::isIntegralType(b.scalar_type(), true)) {
            return Out{at::pow(a.to(at::kLong), b.to(at::kLong)).to(a.scalar_type())};
          }
          return Out{at::pow(a.to(at::kDouble), b.to(at::kDouble)).to(a.scalar_type())};
        }
        // x^2 (LayerNorm's variance in every exported transformer) as x * x: what onnxruntime
        // computes, correctly rounded, and one multiply instead of a vectorised powf (3% of a
        // vit_b_16 pass). Same result as pow(x, 2) for every x, inf, NaN and -0 included.
        if (b.numel() == 1 && b.dim() <= a.dim() && b.is_cpu() &&
            b.to(at::kDouble).item<double>() == 2.0) {
          return Out{at::mul(a, a)};
        }
        return Out{at::pow(a, b.to(a.scalar_type()))};
      }
      case BinOp::kEq:
        return Out{at::eq(a, b)};
      case BinOp::kLt:
        return Out{at::lt(a, b)};
      case BinOp::kLe:
        return Out{at::le(a, b)};
      case BinOp::kGt:
        return Out{at::gt(a, b)};
      case BinOp::kGe:
        return Out{at::ge(a, b)};
      case BinOp::kAnd:
        return Out{at::logical_and(a, b)};
      case BinOp::kOr:
        return Out{at::logical_or(a, b)};
      case BinOp::kXor:
        return Out{at::logical_xor(a, b)};
      case BinOp::kBitAnd:
        return Out{at::bitwise_and(a, b)};
      case BinOp::kBitOr:
        return Out{at::bitwise_or(a, b)};
      case BinOp::kBitXor:
        return Out{at::bitwise_xor(a, b)};
    }
    return Out{};
  });
}

// Mod: fmod=1 takes the dividend's sign (C fmod); fmod=0 (integers only) the divisor's (Python).
Result<KernelPtr> MakeMod(const KernelInit& init) {
  const bool fmod = init.node.GetInt("fmod", 0) != 0;
  return MakeKernel([fmod](KernelContext& c) {
    const at::Device device = ElementwiseDevice({&c.in(0), &c.in(1)});
    const at::Tensor a = On(c.in(0), device);
    const at::Tensor b = On(c.in(1), device);
    return Out{fmod ? at::fmod(a, b) : at::remainder(a, b)};
  });
}

Result<KernelPtr> MakeBitShift(const KernelInit& init) {
  const std::string dir = init.node.GetString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") {
    return init.Error(StatusCode::kInvalidModel, "attribute direction='{}' must be LEFT or RIGHT",
                      dir);
  }
  const bool left = dir == "LEFT";
  return MakeKernel([left](KernelContext& c) {
    // Unsigned semantics: compute in int64 (inputs are uint8 here; wider unsigned types are not
    // representable in ATen 1.13) and wrap back.
    const at::Tensor a = c.in(0).to(at::kLong);
    const at::Tensor b = c.in(1).to(at::kLong);
    at::Tensor r = left ? at::bitwise_left_shift(a, b) : at::bitwise_right_shift(a, b);
    return Out{r.to(c.in(0).scalar_type())};
  });
}

enum class VarOp { kMin, kMax, kSum, kMean };

template <VarOp op>
Result<KernelPtr> Variadic(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    at::Tensor acc = c.in(0);
    for (size_t i = 1; i < c.num_inputs(); ++i) {
      const at::Tensor& x = c.in(i);
      switch (op) {
        case VarOp::kMin:
          acc = at::minimum(acc, x);
          break;
        case VarOp::kMax:
          acc = at::maximum(acc, x);
          break;
        case VarOp::kSum:
        case VarOp::kMean:
          acc = at::add(acc, x);
          break;
      }
    }
    if (op == VarOp::kMean) acc = acc / static_cast<double>(c.num_inputs());
    // A single input may need broadcasting with nothing: still return a fresh reference.
    return Out{acc};
  });
}

Result<KernelPtr> MakeWhere(const KernelInit&) {
  return MakeKernel([](KernelContext& c) {
    const at::Device device = ElementwiseDevice({&c.in(0), &c.in(1), &c.in(2)});
    return Out{at::where(On(c.in(0), device), On(c.in(1), device), On(c.in(2), device))};
  });
}

Result<KernelPtr> MakeCast(const KernelInit& init) {
  const int64_t to = init.node.GetInt("to", 0);
  at::ScalarType st;
  if (!OnnxToScalarType(to, &st)) {
    return init.Error(StatusCode::kUnsupported, "Cast to ONNX dtype {} is not supported", to);
  }
  if (const ir::Value* v = init.node.input(0);
      v && v->type.is_tensor() && v->type.dtype == ir::DType::kString) {
    return init.Error(StatusCode::kUnsupported, "input '{}': Cast from string is not supported",
                      v->name());
  }
  return MakeKernel([st](KernelContext& c) { return Out{c.in(0).to(st)}; });
}

Result<KernelPtr> MakeCastLike(const KernelInit&) {
  return MakeKernel([](KernelContext& c) { return Out{c.in(0).to(c.in(1).scalar_type())}; });
}

}  // namespace

void AppendElementwiseKernels(KernelTable& t) {
  t.push_back({"", "Relu", 1, kLatestOpset, Unary<Relu>});
  t.push_back({"", "Sigmoid", 1, kLatestOpset, Unary<Sigmoid>});
  t.push_back({"", "Tanh", 1, kLatestOpset, Unary<Tanh>});
  t.push_back({"", "Softplus", 1, kLatestOpset, Unary<Softplus>});
  t.push_back({"", "Softsign", 1, kLatestOpset, Unary<Softsign>});
  t.push_back({"", "Erf", 9, kLatestOpset, Unary<Erf>});
  t.push_back({"", "Mish", 18, kLatestOpset, Unary<Mish>});
  t.push_back({"", "Sqrt", 1, kLatestOpset, Unary<Sqrt>});
  t.push_back({"", "Exp", 1, kLatestOpset, Unary<Exp>});
  t.push_back({"", "Log", 1, kLatestOpset, Unary<Log>});
  t.push_back({"", "Abs", 1, kLatestOpset, Unary<Abs>});
  t.push_back({"", "Neg", 1, kLatestOpset, Unary<Neg>});
  t.push_back({"", "Reciprocal", 1, kLatestOpset, Unary<Reciprocal>});
  t.push_back({"", "Floor", 1, kLatestOpset, Unary<Floor>});
  t.push_back({"", "Ceil", 1, kLatestOpset, Unary<Ceil>});
  t.push_back({"", "Round", 11, kLatestOpset, Unary<Round>});
  t.push_back({"", "Sign", 9, kLatestOpset, Unary<Sign>});
  t.push_back({"", "Not", 1, kLatestOpset, Unary<Not>});
  t.push_back({"", "Sin", 7, kLatestOpset, Unary<Sin>});
  t.push_back({"", "Cos", 7, kLatestOpset, Unary<Cos>});
  t.push_back({"", "Tan", 7, kLatestOpset, Unary<Tan>});
  t.push_back({"", "Asin", 7, kLatestOpset, Unary<Asin>});
  t.push_back({"", "Acos", 7, kLatestOpset, Unary<Acos>});
  t.push_back({"", "Atan", 7, kLatestOpset, Unary<Atan>});
  t.push_back({"", "Sinh", 9, kLatestOpset, Unary<Sinh>});
  t.push_back({"", "Cosh", 9, kLatestOpset, Unary<Cosh>});
  t.push_back({"", "Asinh", 9, kLatestOpset, Unary<Asinh>});
  t.push_back({"", "Acosh", 9, kLatestOpset, Unary<Acosh>});
  t.push_back({"", "Atanh", 9, kLatestOpset, Unary<Atanh>});
  t.push_back({"", "IsNaN", 9, kLatestOpset, Unary<IsNaN>});
  t.push_back({"", "IsInf", 10, kLatestOpset, MakeIsInf});
  t.push_back({"", "Identity", 1, kLatestOpset, Unary<Identity>});
  t.push_back({"", "BitwiseNot", 18, kLatestOpset, Unary<BitwiseNot>});
  t.push_back({"", "LeakyRelu", 1, kLatestOpset, MakeLeakyRelu});
  t.push_back({"", "PRelu", 1, kLatestOpset, MakePRelu});
  t.push_back({"", "Elu", 1, kLatestOpset, MakeElu});
  t.push_back({"", "Celu", 12, kLatestOpset, MakeCelu});
  t.push_back({"", "Selu", 1, kLatestOpset, MakeSelu});
  t.push_back({"", "ThresholdedRelu", 10, kLatestOpset, MakeThresholdedRelu});
  t.push_back({"", "HardSigmoid", 1, kLatestOpset, MakeHardSigmoid});
  t.push_back({"", "HardSwish", 14, kLatestOpset, MakeHardSwish});
  t.push_back({"", "Gelu", 20, kLatestOpset, MakeGelu});
  t.push_back({"", "Clip", 1, kLatestOpset, MakeClip});
  t.push_back({"", "Add", 1, kLatestOpset, Binary<BinOp::kAdd>});
  t.push_back({"", "Sub", 1, kLatestOpset, Binary<BinOp::kSub>});
  t.push_back({"", "Mul", 1, kLatestOpset, Binary<BinOp::kMul>});
  t.push_back({"", "Div", 1, kLatestOpset, Binary<BinOp::kDiv>});
  t.push_back({"", "Pow", 1, kLatestOpset, Binary<BinOp::kPow>});
  t.push_back({"", "Equal", 1, kLatestOpset, Binary<BinOp::kEq>});
  t.push_back({"", "Less", 1, kLatestOpset, Binary<BinOp::kLt>});
  t.push_back({"", "LessOrEqual", 12, kLatestOpset, Binary<BinOp::kLe>});
  t.push_back({"", "Greater", 1, kLatestOpset, Binary<BinOp::kGt>});
  t.push_back({"", "GreaterOrEqual", 12, kLatestOpset, Binary<BinOp::kGe>});
  t.push_back({"", "And", 1, kLatestOpset, Binary<BinOp::kAnd>});
  t.push_back({"", "Or", 1, kLatestOpset, Binary<BinOp::kOr>});
  t.push_back({"", "Xor", 1, kLatestOpset, Binary<BinOp::kXor>});
  t.push_back({"", "BitwiseAnd", 18, kLatestOpset, Binary<BinOp::kBitAnd>});
  t.push_back({"", "BitwiseOr", 18, kLatestOpset, Binary<BinOp::kBitOr>});
  t.push_back({"", "BitwiseXor", 18, kLatestOpset, Binary<BinOp::kBitXor>});
  t.push_back({"", "BitShift", 11, kLatestOpset, MakeBitShift});
  t.push_back({"", "Mod", 10, kLatestOpset, MakeMod});
  t.push_back({"", "Min", 1, kLatestOpset, Variadic<VarOp::kMin>});
  t.push_back({"", "Max", 1, kLatestOpset, Variadic<VarOp::kMax>});
  t.push_back({"", "Sum", 1, kLatestOpset, Variadic<VarOp::kSum>});
  t.push_back({"", "Mean", 1, kLatestOpset, Variadic<VarOp::kMean>});
  t.push_back({"", "Where", 9, kLatestOpset, MakeWhere});
  t.push_back({"", "Cast", 1, kLatestOpset, MakeCast});
  t.push_back({"", "CastLike", 15, kLatestOpset, MakeCastLike});
}

}  // namespace quantkit::runtime
