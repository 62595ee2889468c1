// QOperator -> Q/DQ -> float on hand-made models, checked numerically with quantkit's runtime
// (which executes QLinearConv, ConvInteger, MatMulInteger and DynamicQuantizeLinear):
//   * the Q/DQ rewrite computes what the integer model computes (up to one output step: the
//     integer op requantizes its exact int32 sum, the Q/DQ form rounds a float sum);
//   * the float model equals the integer model's float equivalent (inputs on the grid: only the
//     output rounding differs);
//   * the plan follows the symmetric-int8 rule; dynamic activations are reported;
//   * unsupported inputs fail with a message naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/verifier.h"
#include "passes/extract_qdq.h"
#include "passes/qop_to_qdq.h"
#include "passes/strip_qdq.h"
#include "quant/symmetric_conversion.h"
#include "runtime/interpreter.h"

namespace quantkit::passes {
namespace {

using ir::Attribute;
using ir::DType;
using ir::Tensor;

// The integer op requantizes its exact sum, the Q/DQ form its float sum: near a rounding tie
// they may land one output step apart.
constexpr double kOneOutputStep = 1.0;
// Float model vs integer model with inputs on the grid: only the output rounding (half a step),
// plus float32 summation order.
constexpr double kHalfOutputStep = 0.5 + 1e-4;
// Two float computations of the same sum in a different order (ATen conv vs the integer kernel's
// exact sum scaled once).
constexpr double kFloatSumRel = 1e-5;

constexpr float kXs = 0.05f;
constexpr int kXz = 128;  // uint8, zero point != 0
constexpr float kYs = 0.1f;
constexpr int kYz = 100;

ir::Value* Scalar(ir::Graph& g, const std::string& name, float v) {
  return g.AddInitializer(name, Tensor::FromVector<float>(DType::kFloat, {}, {v}));
}
ir::Value* U8(ir::Graph& g, const std::string& name, int v) {
  return g.AddInitializer(
      name, Tensor::FromVector<uint8_t>(DType::kUint8, {}, {static_cast<uint8_t>(v)}));
}

// Input on the uint8 grid of (kXs, kXz), so quantizing it is exact.
Tensor GridInput(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(kXz - 20, kXz + 20);
  Tensor x(DType::kFloat, dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.mutable_data_as<float>()[i] = kXs * static_cast<float>(k(rng) - kXz);
  return x;
}

Tensor RandomInt8(std::vector<int64_t> dims, uint32_t seed, int lim) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-lim, lim);
  Tensor t(DType::kInt8, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(d(rng));
  return t;
}

std::vector<float> RunFloat(const ir::Model& model, const Tensor& x) {
  // Borrowed: the caller keeps the model alive for the run.
  auto interp = runtime::Interpreter::Create(
      std::shared_ptr<const ir::Model>(&model, [](const ir::Model*) {}));
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  if (!interp.ok()) return {};
  auto out = (*interp)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  const Tensor& t = out->front().tensor;
  EXPECT_EQ(t.dtype(), DType::kFloat);
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

// x [1,2,6,6] -Q(0.05, u8 128)-> QLinearConv(W int8 per-channel [3,2,3,3], B int32, pads 1)
//   -> y_quantized (0.1, u8 100) -> MaxPool 2x2 -> p_quantized -DQ-> out
ir::Model QLinearConvModel(int64_t opset, int y_zero_point = kYz) {
  ir::Model m;
  m.SetOpset("", opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(
      DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2), ir::Dim::Known(6), ir::Dim::Known(6)});
  g.AddInput(x);
  ir::Value* xs = Scalar(g, "x_scale", kXs);
  ir::Value* xz = U8(g, "x_zero_point", kXz);
  ir::Node* q = g.AddNode("QuantizeLinear", {x, xs, xz}, {"x_quantized"}, "", "x_Q").value();
  ir::Value* w = g.AddInitializer("W_quantized", RandomInt8({3, 2, 3, 3}, 7, 40));
  ir::Value* ws = g.AddInitializer(
      "W_scale", Tensor::FromVector<float>(DType::kFloat, {3}, {0.01f, 0.02f, 0.005f}));
  ir::Value* wz =
      g.AddInitializer("W_zero_point", Tensor::FromVector<int8_t>(DType::kInt8, {3}, {0, 0, 0}));
  ir::Value* b = g.AddInitializer(
      "B_quantized", Tensor::FromVector<int32_t>(DType::kInt32, {3}, {400, -1000, 2500}));
  ir::Node* conv = g.AddNode("QLinearConv",
                             {q->output(0), xs, xz, w, ws, wz, Scalar(g, "y_scale", kYs),
                              U8(g, "y_zero_point", y_zero_point), b},
                             {"y_quantized"}, "", "conv_quant")
                       .value();
  conv->SetAttr(Attribute::Ints("pads", {1, 1, 1, 1}));
  conv->SetAttr(Attribute::Ints("kernel_shape", {3, 3}));
  ir::Node* pool = g.AddNode("MaxPool", {conv->output(0)}, {"p_quantized"}, "", "pool").value();
  pool->SetAttr(Attribute::Ints("kernel_shape", {2, 2}));
  pool->SetAttr(Attribute::Ints("strides", {2, 2}));
  ir::Node* dq = g.AddNode("DequantizeLinear",
                           {pool->output(0), g.FindValue("y_scale"), g.FindValue("y_zero_point")},
                           {"out"}, "", "out_DQ")
                     .value();
  g.AddOutput(dq->output(0));
  EXPECT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).ToString();
  return m;
}

int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

class QLinearConvAtOpset : public ::testing::TestWithParam<int64_t> {};

TEST_P(QLinearConvAtOpset, QdqAndFloatModelsMatchTheIntegerModel) {
  const Tensor x = GridInput({1, 2, 6, 6}, 11);
  ir::Model qop = QLinearConvModel(GetParam());
  const std::vector<float> ref = RunFloat(qop, x);
  ASSERT_FALSE(ref.empty());

  ir::Model model = QLinearConvModel(GetParam());
  ASSERT_TRUE(HasIntegerOps(*model.graph));
  auto report = RunPass(model, QOperatorToQdq());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(counter::kNodesConverted), 1);
  EXPECT_EQ(report->Count(counter::kPassthroughNodes), 1);
  EXPECT_FALSE(HasIntegerOps(*model.graph));
  EXPECT_EQ(CountOps(*model.graph, "Conv"), 1);
  EXPECT_EQ(CountOps(*model.graph, "QLinearConv"), 0);
  const std::vector<float> qdq = RunFloat(model, x);
  ASSERT_EQ(qdq.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LE(std::fabs(qdq[i] - ref[i]), kOneOutputStep * kYs + 1e-6) << "element " << i;
  }

  // The plan: keyed by the float names (ORT's "_quantized" suffix dropped).
  ExtractReport er;
  auto plan = ExtractQdqPlan(*model.graph, {}, &er);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto* px = plan->Find("x");
  const auto* py = plan->Find("y");
  const auto* pw = plan->Find("W");
  ASSERT_TRUE(px && py && pw);
  EXPECT_EQ(px->scale.front(), quant::ToSymmetricInt8(kXs, kXz, DType::kUint8)->scale_to);
  EXPECT_EQ(py->scale.front(), quant::ToSymmetricInt8(kYs, kYz, DType::kUint8)->scale_to);
  for (const auto& [name, t] : plan->tensors) {
    for (int32_t z : t.zero_point) EXPECT_EQ(z, 0) << name;
  }
  // Per-channel symmetric int8 weights keep their scales exactly.
  EXPECT_EQ(pw->role, quant::TensorRole::kWeight);
  EXPECT_EQ(pw->axis, 0);
  EXPECT_EQ(pw->scale, (std::vector<float>{0.01f, 0.02f, 0.005f}));

  auto strip = RunPass(model, StripQdq());
  ASSERT_TRUE(strip.ok()) << strip.status().ToString();
  EXPECT_EQ(CountOps(*model.graph, "QuantizeLinear"), 0);
  EXPECT_EQ(CountOps(*model.graph, "DequantizeLinear"), 0);
  const ir::Value* bias = model.graph->FindValue("B");
  ASSERT_TRUE(bias && bias->initializer);
  // b_float = b_int32 * x_scale * w_scale[c]
  EXPECT_FLOAT_EQ(bias->initializer->data_as<float>()[1], -1000.0f * (kXs * 0.02f));
  const std::vector<float> flt = RunFloat(model, x);
  ASSERT_EQ(flt.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LE(std::fabs(flt[i] - ref[i]), kHalfOutputStep * kYs) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Opsets, QLinearConvAtOpset, ::testing::Values(10, 13));

// x -> DynamicQuantizeLinear -> ConvInteger(W u8, zp per tensor) -> Cast -> Mul(x_s * w_s) -> out
// (onnxruntime quantize_dynamic's pattern), or the static variant where x comes from a
// QuantizeLinear and the scale product is a constant.
ir::Model IntegerConvModel(bool dynamic, int x_zero_point_in_conv = kXz) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(
      DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2), ir::Dim::Known(5), ir::Dim::Known(5)});
  g.AddInput(x);
  Tensor wt(DType::kUint8, {4, 2, 3, 3});
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(0, 255);
  for (int64_t i = 0; i < wt.numel(); ++i)
    wt.mutable_data_as<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
  ir::Value* w = g.AddInitializer("W_quantized", std::move(wt));
  ir::Value* wz = U8(g, "W_zero_point", 120);
  const float w_scale = 0.004f;
  ir::Value* xq = nullptr;
  ir::Value* xz = nullptr;
  ir::Value* scale = nullptr;
  if (dynamic) {
    ir::Node* dql = g.AddNode("DynamicQuantizeLinear", {x},
                              {"x_quantized", "x_scale", "x_zero_point"}, "", "x_DQL")
                        .value();
    xq = dql->output(0);
    xz = dql->output(2);
    scale = g.AddNode("Mul", {dql->output(1), Scalar(g, "W_scale", w_scale)}, {"scales"}, "",
                      "scales_mul")
                .value()
                ->output(0);
  } else {
    ir::Node* q =
        g.AddNode("QuantizeLinear", {x, Scalar(g, "x_scale", kXs), U8(g, "x_zero_point", kXz)},
                  {"x_quantized"}, "", "x_Q")
            .value();
    xq = q->output(0);
    xz = U8(g, "conv_x_zero_point", x_zero_point_in_conv);
    scale = Scalar(g, "scales", kXs * w_scale);
  }
  ir::Node* conv = g.AddNode("ConvInteger", {xq, w, xz, wz}, {"y_int"}, "", "conv").value();
  conv->SetAttr(Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Node* cast = g.AddNode("Cast", {conv->output(0)}, {"y_cast"}, "", "cast").value();
  cast->SetAttr(Attribute::Int("to", 1));
  ir::Node* mul = g.AddNode("Mul", {cast->output(0), scale}, {"out"}, "", "scale").value();
  g.AddOutput(mul->output(0));
  EXPECT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).ToString();
  return m;
}

TEST(QOperatorToQdq, StaticConvIntegerWithXZeroPointIsExact) {
  const Tensor x = GridInput({1, 2, 5, 5}, 5);
  ir::Model qop = IntegerConvModel(/*dynamic=*/false);
  const std::vector<float> ref = RunFloat(qop, x);
  ir::Model model = IntegerConvModel(/*dynamic=*/false);
  auto report = RunPass(model, QOperatorToQdq());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->List(list::kDynamicTensors).empty());
  EXPECT_EQ(CountOps(*model.graph, "ConvInteger"), 0);
  EXPECT_EQ(CountOps(*model.graph, "Cast"), 0);
  ExtractReport er;
  auto plan = ExtractQdqPlan(*model.graph, {}, &er);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(plan->Find("x"));
  ASSERT_TRUE(RunPass(model, StripQdq()).ok());
  const std::vector<float> flt = RunFloat(model, x);
  ASSERT_EQ(flt.size(), ref.size());
  double max_abs = 0.0;
  for (float v : ref) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(flt[i], ref[i], kFloatSumRel * max_abs) << "element " << i;
  }
}

TEST(QOperatorToQdq, ConvIntegerZeroPointMismatchIsRejected) {
  // Without the check the float model would silently shift every input by 2 steps.
  ir::Model model = IntegerConvModel(/*dynamic=*/false, kXz + 2);
  auto report = RunPass(model, QOperatorToQdq());
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().ToString().find("conv"), std::string::npos)
      << report.status().ToString();
}

TEST(QOperatorToQdq, DynamicQuantizationBecomesFloatAndIsReported) {
  const Tensor x = GridInput({1, 2, 5, 5}, 9);
  ir::Model qop = IntegerConvModel(/*dynamic=*/true);
  const std::vector<float> ref = RunFloat(qop, x);
  ir::Model model = IntegerConvModel(/*dynamic=*/true);
  auto report = RunPass(model, QOperatorToQdq());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->List(list::kDynamicTensors), std::vector<std::string>{"x"});
  EXPECT_EQ(CountOps(*model.graph, "DynamicQuantizeLinear"), 0);
  ExtractReport er;
  auto plan = ExtractQdqPlan(*model.graph, {}, &er);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->Find("x"));  // no static scale: convert marks it not quantized
  EXPECT_TRUE(plan->Find("W"));
  ASSERT_TRUE(RunPass(model, StripQdq()).ok());
  const std::vector<float> flt = RunFloat(model, x);
  ASSERT_EQ(flt.size(), ref.size());
  // The integer model rounds x to its dynamic uint8 grid: each output moves by at most
  // sum|w| * x_step / 2 (x_step = (max(x, 0) - min(x, 0)) / 255).
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, x.data_as<float>()[i]);
    hi = std::max(hi, x.data_as<float>()[i]);
  }
  const ir::Tensor& w = *model.graph->FindValue("W")->initializer;
  double max_w_l1 = 0.0;
  const int64_t per_out = w.numel() / 4;
  for (int64_t o = 0; o < 4; ++o) {
    double l1 = 0.0;
    for (int64_t i = 0; i < per_out; ++i) l1 += std::fabs(w.data_as<float>()[o * per_out + i]);
    max_w_l1 = std::max(max_w_l1, l1);
  }
  const double bound = max_w_l1 * (hi - lo) / 255.0 / 2.0 * (1.0 + kFloatSumRel);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LE(std::fabs(flt[i] - ref[i]), bound) << "element " << i;
}

TEST(QOperatorToQdq, FusedReluComesBackAsAnExplicitRelu) {
  // Output grid uint8 zp 0: the integer op saturates negatives to 0 (onnxruntime's Conv+Relu
  // fusion). Without the restored Relu the float model would pass negative conv outputs on.
  const Tensor x = GridInput({1, 2, 6, 6}, 13);
  ir::Model qop = QLinearConvModel(13, /*y_zero_point=*/0);
  const std::vector<float> ref = RunFloat(qop, x);
  ir::Model model = QLinearConvModel(13, /*y_zero_point=*/0);
  auto report = RunPass(model, QOperatorToQdq());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(counter::kRelusRestored), 1);
  ASSERT_TRUE(RunPass(model, StripQdq()).ok());
  EXPECT_EQ(CountOps(*model.graph, "Relu"), 1);
  const ir::Value* y = model.graph->FindValue("y");  // the float tensor is the Relu's output
  ASSERT_TRUE(y && y->producer());
  EXPECT_EQ(y->producer()->op_type(), "Relu");
  const std::vector<float> flt = RunFloat(model, x);
  ASSERT_EQ(flt.size(), ref.size());
  int zeros = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LE(std::fabs(flt[i] - ref[i]), kHalfOutputStep * kYs) << "element " << i;
    zeros += ref[i] == 0.0f;
  }
  EXPECT_GT(zeros, 0)
      << "the input must produce negative conv outputs for this test to mean anything";
}

TEST(NormalizeTorchQdq, FoldsNoOpCastAndConstantZeroPoint) {
  // torch 1.13 FX export: Q(x) -> Cast(to=uint8) -> DQ, and DQ(bias, s, Cast(ConstantOfShape)).
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(DType::kFloat, {ir::Dim::Known(3)});
  g.AddInput(x);
  ir::Value* s = g.AddInitializer("s", Tensor::FromVector<float>(DType::kFloat, {1}, {0.1f}));
  ir::Node* q = g.AddNode("QuantizeLinear", {x, s, U8(g, "z", 10)}, {"q"}, "", "q").value();
  ir::Node* cast = g.AddNode("Cast", {q->output(0)}, {"q_cast"}, "", "cast").value();
  cast->SetAttr(Attribute::Int("to", 2));
  ir::Node* dq =
      g.AddNode("DequantizeLinear", {cast->output(0), s, g.FindValue("z")}, {"xd"}, "", "dq")
          .value();
  ir::Value* shape =
      g.AddInitializer("shape", Tensor::FromVector<int64_t>(DType::kInt64, {1}, {1}));
  ir::Node* cos = g.AddNode("ConstantOfShape", {shape}, {"zeros"}, "", "cos").value();
  ir::Node* zcast = g.AddNode("Cast", {cos->output(0)}, {"bz"}, "", "zcast").value();
  zcast->SetAttr(Attribute::Int("to", 6));
  ir::Value* b = g.AddInitializer("b", Tensor::FromVector<int32_t>(DType::kInt32, {3}, {5, -5, 7}));
  ir::Node* bdq =
      g.AddNode("DequantizeLinear", {b, s, zcast->output(0)}, {"bd"}, "", "bdq").value();
  ir::Node* add = g.AddNode("Add", {dq->output(0), bdq->output(0)}, {"y"}, "", "add").value();
  g.AddOutput(add->output(0));
  ASSERT_TRUE(ir::Verify(m).ok());
  auto n = RunPass(m, NormalizeTorchQdq());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->Count(counter::kFolded),
            3);  // the no-op Cast, ConstantOfShape and the Cast of its constant
  EXPECT_EQ(CountOps(g, "Cast"), 0);
  EXPECT_EQ(CountOps(g, "ConstantOfShape"), 0);
  // The bias DQ now reads a constant int32 zero point (rank 0: [1]-shaped per-tensor parameters
  // become scalars so they do not read as per-axis).
  const ir::Value* bz = bdq->input(2);
  ASSERT_TRUE(bz && bz->initializer);
  EXPECT_EQ(bz->initializer->dtype(), DType::kInt32);
  EXPECT_EQ(bz->initializer->rank(), 0);
  EXPECT_EQ(bdq->input(1)->initializer->rank(), 0);
  ExtractReport er;
  auto plan = ExtractQdqPlan(g, {}, &er);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->Find("x")) << "Q -> DQ must be a pair again";
  EXPECT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).ToString();
}

TEST(QOperatorToQdq, IntegerGraphInputIsUnsupported) {
  // A model fed uint8 directly cannot become a float model without changing its interface.
  ir::Model m = QLinearConvModel(13);
  ir::Graph& g = *m.graph;
  ir::Value* xi = g.CreateValue("x_int");
  xi->type = ir::TypeInfo::Tensor(
      DType::kUint8, {ir::Dim::Known(1), ir::Dim::Known(2), ir::Dim::Known(6), ir::Dim::Known(6)});
  g.AddInput(xi);
  ir::Node* conv = nullptr;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "QLinearConv") conv = n;
  }
  g.SetNodeInput(conv, 0, xi);
  auto report = RunPass(m, QOperatorToQdq());
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().ToString().find("x_int"), std::string::npos)
      << report.status().ToString();
}

TEST(QOperatorToQdq, UnknownContribOpIsNamed) {
  ir::Model m = QLinearConvModel(13);
  m.SetOpset("com.microsoft", 1);
  ir::Graph& g = *m.graph;
  ir::Node* w =
      g.AddNode("QLinearWhere", {g.FindValue("out")}, {"w_out"}, "com.microsoft", "where_quant")
          .value();
  g.AddOutput(w->output(0));
  auto report = RunPass(m, QOperatorToQdq());
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().ToString().find("where_quant"), std::string::npos)
      << report.status().ToString();
}

}  // namespace
}  // namespace quantkit::passes
