// Training mode of the interpreter: gradients of every op family on the forward path of the zoo
// and torchvision models against central finite differences (float64 graphs), the parameter
// overrides autograd reaches through, and FakeQuantize (bit-exact forward, STE and LSQ backward).
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/params.h"
#include "quant/weight_scales.h"
#include "runtime/aten_bridge.h"
#include "runtime/interpreter_aten.h"
#include "runtime/training_ops.h"
#include "testing/tolerances.h"

namespace quantkit::runtime {
namespace {

struct In {
  at::Tensor value;
  bool diff = true;  // take the gradient with respect to this input
};

struct OpCase {
  std::string name;
  std::string op_type;
  std::vector<In> inputs;
  std::vector<ir::Attribute> (*attrs)() = nullptr;
  int64_t opset = 17;
};

ir::DType DTypeOf(const at::Tensor& t) { return FromScalarType(t.scalar_type()); }

// One-node graph whose inputs are all graph inputs "in0", "in1", ...
std::unique_ptr<Interpreter> Build(const OpCase& c) {
  ir::Model m;
  m.SetOpset("", c.opset);
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ir::Value* v = g.CreateValue("in" + std::to_string(i));
    v->type = ir::TypeInfo::Tensor(DTypeOf(c.inputs[i].value), {});
    v->type.has_shape = false;
    g.AddInput(v);
    ins.push_back(v);
  }
  auto node = g.AddNode(c.op_type, ins, {"out"}, "", "node0");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  if (c.attrs) {
    for (ir::Attribute& a : c.attrs()) (*node)->SetAttr(std::move(a));
  }
  g.AddOutput((*node)->output(0));
  InterpreterOptions o;
  o.training = true;
  auto interp = Interpreter::Create(std::move(m), o);
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  return std::move(*interp);
}

// sum(out * weights): a scalar whose gradient reaches every output element differently.
at::Tensor Loss(const Interpreter& interp, const std::vector<at::Tensor>& values,
                const at::Tensor& weights) {
  std::vector<std::pair<std::string, at::Tensor>> feeds;
  for (size_t i = 0; i < values.size(); ++i)
    feeds.emplace_back("in" + std::to_string(i), values[i]);
  auto out = RunAten(interp, feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return (out->at(0) * weights).sum();
}

void CheckGradients(const OpCase& c) {
  SCOPED_TRACE(c.name);
  auto interp = Build(c);
  ASSERT_NE(interp, nullptr);
  std::vector<at::Tensor> values;
  for (const In& in : c.inputs) {
    values.push_back(in.diff ? in.value.clone().set_requires_grad(true) : in.value);
  }
  at::Tensor probe;
  {
    at::NoGradGuard g;
    std::vector<std::pair<std::string, at::Tensor>> feeds;
    for (size_t i = 0; i < values.size(); ++i)
      feeds.emplace_back("in" + std::to_string(i), values[i]);
    auto out = RunAten(*interp, feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    at::manual_seed(7);
    probe = at::randn(out->at(0).sizes(), at::kDouble);
  }
  at::Tensor loss = Loss(*interp, values, probe);
  loss.backward();
  for (size_t i = 0; i < values.size(); ++i) {
    if (!c.inputs[i].diff) continue;
    ASSERT_TRUE(values[i].grad().defined()) << "no gradient reached input " << i;
    const at::Tensor analytic = values[i].grad();
    at::Tensor base = values[i].detach().clone();
    at::NoGradGuard g;
    double worst = 0;
    for (int64_t k = 0; k < base.numel(); ++k) {
      std::vector<at::Tensor> plus = values, minus = values;
      at::Tensor p = base.clone(), q = base.clone();
      p.view(-1)[k] += testing::kFiniteDifferenceStep;
      q.view(-1)[k] -= testing::kFiniteDifferenceStep;
      plus[i] = p, minus[i] = q;
      for (size_t j = 0; j < values.size(); ++j) {
        if (j != i) plus[j] = minus[j] = values[j].detach();
      }
      const double numeric =
          (Loss(*interp, plus, probe).item<double>() - Loss(*interp, minus, probe).item<double>()) /
          (2 * testing::kFiniteDifferenceStep);
      const double a = analytic.reshape(-1)[k].item<double>();
      const double err = std::abs(a - numeric) /
                         (testing::kGradCheckAtol + testing::kGradCheckRtol * std::abs(numeric));
      worst = std::max(worst, err);
      EXPECT_NEAR(a, numeric, testing::kGradCheckAtol + testing::kGradCheckRtol * std::abs(numeric))
          << "input " << i << " element " << k;
    }
    EXPECT_LE(worst, 1.0);
  }
}

at::Tensor R(std::vector<int64_t> shape, int seed, double lo = -1, double hi = 1) {
  at::manual_seed(seed);
  return at::rand(shape, at::kDouble) * (hi - lo) + lo;
}
at::Tensor I64(std::vector<int64_t> v) { return at::tensor(v, at::kLong); }

std::vector<ir::Attribute> None() { return {}; }

TEST(TrainingGradients, EveryOpFamilyMatchesFiniteDifferences) {
  const std::vector<OpCase> cases = {
      {"Conv strided padded",
       "Conv",
       {{R({1, 2, 5, 5}, 1)}, {R({3, 2, 3, 3}, 2)}, {R({3}, 3)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
         a.push_back(ir::Attribute::Ints("strides", {2, 2}));
         return a;
       }},
      {"Conv depthwise",
       "Conv",
       {{R({1, 3, 4, 4}, 4)}, {R({3, 1, 3, 3}, 5)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Int("group", 3));
         return a;
       }},
      {"ConvTranspose",
       "ConvTranspose",
       {{R({1, 2, 3, 3}, 6)}, {R({2, 3, 3, 3}, 7)}, {R({3}, 8)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("strides", {2, 2}));
         return a;
       }},
      {"Gemm transB alpha beta",
       "Gemm",
       {{R({2, 4}, 9)}, {R({3, 4}, 10)}, {R({3}, 11)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Int("transB", 1));
         a.push_back(ir::Attribute::Float("alpha", 0.5f));
         a.push_back(ir::Attribute::Float("beta", 2.0f));
         return a;
       }},
      {"MatMul batched", "MatMul", {{R({2, 3, 4}, 12)}, {R({4, 5}, 13)}}, &None},
      {"Relu", "Relu", {{R({3, 4}, 14)}}, &None},
      {"Clip (ReLU6)",
       "Clip",
       {{R({3, 4}, 15, -3, 9)},
        {at::tensor(0.0, at::kDouble), false},
        {at::tensor(6.0, at::kDouble), false}},
       &None},
      {"Sigmoid", "Sigmoid", {{R({3, 4}, 16, -4, 4)}}, &None},
      {"Tanh", "Tanh", {{R({3, 4}, 17)}}, &None},
      {"Erf (GELU)", "Erf", {{R({3, 4}, 18)}}, &None},
      {"Sqrt", "Sqrt", {{R({3, 4}, 19, 0.5, 2)}}, &None},
      {"Add broadcast", "Add", {{R({2, 3, 4}, 20)}, {R({4}, 21)}}, &None},
      {"Sub", "Sub", {{R({2, 3}, 22)}, {R({2, 3}, 23)}}, &None},
      {"Mul broadcast (SE)", "Mul", {{R({1, 3, 2, 2}, 24)}, {R({1, 3, 1, 1}, 25)}}, &None},
      {"Div", "Div", {{R({2, 3}, 26)}, {R({2, 3}, 27, 1, 2)}}, &None},
      {"Pow", "Pow", {{R({2, 3}, 28, 0.5, 2)}, {at::tensor(2.0, at::kDouble), false}}, &None},
      {"MaxPool",
       "MaxPool",
       {{R({1, 2, 4, 4}, 29)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("kernel_shape", {2, 2}));
         a.push_back(ir::Attribute::Ints("strides", {2, 2}));
         return a;
       }},
      {"AveragePool padded",
       "AveragePool",
       {{R({1, 2, 4, 4}, 30)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("kernel_shape", {3, 3}));
         a.push_back(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
         return a;
       }},
      {"GlobalAveragePool", "GlobalAveragePool", {{R({2, 3, 3, 3}, 31)}}, &None},
      {"Flatten", "Flatten", {{R({2, 3, 2}, 32)}}, &None},
      {"Reshape", "Reshape", {{R({2, 6}, 33)}, {I64({3, -1}), false}}, &None},
      {"Transpose",
       "Transpose",
       {{R({2, 3, 4}, 34)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("perm", {2, 0, 1}));
         return a;
       }},
      {"Concat",
       "Concat",
       {{R({2, 3}, 35)}, {R({2, 2}, 36)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Int("axis", 1));
         return a;
       }},
      {"Slice",
       "Slice",
       {{R({4, 5}, 37)}, {I64({1}), false}, {I64({4}), false}, {I64({1}), false}},
       &None},
      {"Gather (class token)", "Gather", {{R({4, 3}, 38)}, {I64({0, 2}), false}}, &None},
      {"Softmax", "Softmax", {{R({2, 5}, 39)}}, &None},
      {"LayerNormalization",
       "LayerNormalization",
       {{R({2, 3, 4}, 40)}, {R({4}, 41)}, {R({4}, 42)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Int("axis", -1));
         return a;
       }},
      {"BatchNormalization (inference)",
       "BatchNormalization",
       {{R({2, 3, 2, 2}, 43)},
        {R({3}, 44)},
        {R({3}, 45)},
        {R({3}, 46), false},
        {R({3}, 47, 0.5, 1.5), false}},
       &None},
      {"Expand", "Expand", {{R({1, 3}, 48)}, {I64({2, 3}), false}}, &None},
      {"Where",
       "Where",
       {{at::tensor(std::vector<int64_t>{1, 0, 1}, at::kLong).to(at::kBool), false},
        {R({3}, 49)},
        {R({3}, 50)}},
       &None},
      {"ReduceMean",
       "ReduceMean",
       {{R({2, 3, 4}, 51)}},
       [] {
         std::vector<ir::Attribute> a;
         a.push_back(ir::Attribute::Ints("axes", {-1}));
         return a;
       }},
      {"Unsqueeze", "Unsqueeze", {{R({2, 3}, 52)}, {I64({0}), false}}, &None},
      {"Squeeze", "Squeeze", {{R({1, 3}, 53)}, {I64({0}), false}}, &None},
      {"HardSigmoid", "HardSigmoid", {{R({3, 4}, 54, -2, 2)}}, &None},
      {"HardSwish", "HardSwish", {{R({3, 4}, 55, -2, 2)}}, &None},
      {"Pad", "Pad", {{R({1, 2, 3}, 56)}, {I64({0, 0, 1, 0, 0, 1}), false}}, &None},
      {"Identity", "Identity", {{R({3}, 57)}}, &None},
  };
  for (const OpCase& c : cases) CheckGradients(c);
}

// Initializers overridden by AtenRunOptions::parameters are what autograd reaches.
TEST(TrainingParameters, OverridesReachAutogradAndAreChecked) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2)});
  g.AddInput(x);
  ir::Value* w = g.AddInitializer(
      "w", ir::Tensor::FromVector<float>(ir::DType::kFloat, {3, 2}, {1, 2, 3, 4, 5, 6}));
  auto node = g.AddNode("Gemm", {x, w}, {"y"});
  ASSERT_TRUE(node.ok());
  (*node)->SetAttr(ir::Attribute::Int("transB", 1));
  g.AddOutput((*node)->output(0));
  auto interp = Interpreter::Create(std::move(m));
  ASSERT_TRUE(interp.ok());
  const at::Tensor xin = at::tensor({1.0f, -1.0f}).reshape({1, 2});
  at::Tensor param = at::zeros({3, 2}).set_requires_grad(true);
  std::vector<std::pair<std::string, at::Tensor>> params{{"w", param}};
  AtenRunOptions o;
  o.parameters = &params;
  auto out = RunAten(**interp, {{"x", xin}}, o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at(0).abs().sum().item<float>(), 0.0f)
      << "the override must replace the initializer";
  out->at(0).sum().backward();
  ASSERT_TRUE(param.grad().defined());
  EXPECT_TRUE(at::equal(param.grad(), at::tensor({1.0f, -1.0f}).repeat({3, 1})));

  std::vector<std::pair<std::string, at::Tensor>> bad_name{{"nope", param}};
  o.parameters = &bad_name;
  auto r1 = RunAten(**interp, {{"x", xin}}, o);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("nope"), std::string::npos);
  std::vector<std::pair<std::string, at::Tensor>> bad_shape{{"w", at::zeros({2, 3})}};
  o.parameters = &bad_shape;
  EXPECT_FALSE(RunAten(**interp, {{"x", xin}}, o).ok());
}

// The forward is bit for bit quant::QuantizeValue + quant::Dequantize (the export's math), ties
// and saturation included.
TEST(FakeQuantize, ForwardIsTheExportMathBitForBit) {
  const float scale = 0.5f;
  const std::vector<float> x{-70.f, -64.25f, -0.25f, 0.25f, 0.75f,
                             1.25f, 63.5f,   63.75f, 64.0f, 0.0f};
  const std::vector<float> expected{-64.f, -64.f, -0.f, 0.f, 1.f, 1.f, 63.5f, 63.5f, 63.5f, 0.f};
  at::Tensor y = FakeQuantizeSymmetricInt8(at::tensor(x), at::tensor(scale), -1, false);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[static_cast<int64_t>(i)].item<float>(), expected[i]) << x[i];

  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<float> v(4096);
  for (float& f : v) f = dist(rng);
  const float s = 0.0173f;
  at::Tensor fq = FakeQuantizeSymmetricInt8(at::tensor(v), at::tensor(s), -1, false);
  const quant::QuantRange range{-128, 127};
  for (size_t i = 0; i < v.size(); ++i) {
    const float ref = quant::Dequantize(quant::QuantizeValue(v[i], s, 0, range), s, 0);
    ASSERT_EQ(fq[static_cast<int64_t>(i)].item<float>(), ref) << "x=" << v[i];
  }
}

TEST(FakeQuantize, PerChannelScalesAreRecomputedLikeCalibrate) {
  at::manual_seed(3);
  at::Tensor w = at::randn({4, 3, 2, 2});
  w[2].zero_();        // an all-zero channel takes kZeroChannelScale
  w[1].fill_(3e-40f);  // so does a denormal one (PP-OCRv4 recognition ships such a channel)
  at::Tensor s = WeightScalesFrom(w, 0);
  std::vector<float> data(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  auto amax = quant::PerChannelAbsMax(data.data(), {4, 3, 2, 2}, 0, "w");
  ASSERT_TRUE(amax.ok());
  const std::vector<float> ref = quant::WeightScalesFromAmax(*amax);
  for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(s[c].item<float>(), ref[static_cast<size_t>(c)]);
  EXPECT_EQ(ref[1], quant::kZeroChannelScale);  // without it, a denormal scale the plan refuses
  EXPECT_EQ(ref[2], quant::kZeroChannelScale);
}

TEST(FakeQuantize, StraightThroughInsideTheRangeZeroOutside) {
  at::Tensor x = at::tensor({-65.f, -64.f, 0.3f, 63.7f, 63.76f, 70.f}).set_requires_grad(true);
  at::Tensor y = FakeQuantizeSymmetricInt8(x, at::tensor(0.5f), -1, false);
  y.sum().backward();
  // round(x/0.5): -130 (out), -128 (in), 1 (in), 127 (in), 128 (out), 140 (out)
  const std::vector<float> expected{0, 1, 1, 1, 0, 0};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(x.grad()[static_cast<int64_t>(i)].item<float>(), expected[i]);
}

TEST(FakeQuantize, LsqScaleGradient) {
  at::Tensor x = at::tensor({0.3f, -0.8f, 100.f}).reshape({1, 3});
  at::Tensor s = at::tensor(0.5f).set_requires_grad(true);
  FakeQuantizeSymmetricInt8(x, s, -1, /*lsq=*/true).sum().backward();
  // d(q*s)/ds: q - x/s inside (x/s = 0.6 -> q = 1: 0.4; x/s = -1.6 -> q = -2: -0.4), the bound
  // outside (x/s = 200 -> 127); times 1/sqrt(3 * 127).
  const double expected = ((1.0 - 0.6) + (-2.0 + 1.6) + 127.0) / std::sqrt(3.0 * 127.0);
  EXPECT_NEAR(s.grad().item<double>(), expected, testing::kLsqGradAtol);
}

}  // namespace
}  // namespace quantkit::runtime
