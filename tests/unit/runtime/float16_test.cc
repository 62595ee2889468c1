// float16 / bfloat16 models in the interpreter, computed as TensorRT computes a strongly typed
// network (runtime/float_precision.h): 16-bit storage, FP32 arithmetic inside each kernel, one
// rounding at each tensor boundary, Q/DQ arithmetic in FP32, and the two fusions that keep a
// tensor in FP32. Each expected value is computed here in float32 / double and rounded with
// ir/float16.h; the inputs were picked (numpy search) where the alternatives differ, so each
// test fails if the interpreter computes in 16 bits, skips a rounding or adds one.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ir/float16.h"
#include "ir/graph.h"
#include "runtime/interpreter.h"

namespace quantkit::runtime {
namespace {

using ir::Dim;
using ir::DType;

ir::Tensor Halves(std::vector<int64_t> dims, const std::vector<float>& v,
                  DType dtype = DType::kFloat16) {
  ir::Tensor t(dtype, std::move(dims));
  uint16_t* p = t.mutable_data_as<uint16_t>();
  for (size_t i = 0; i < v.size(); ++i)
    p[i] = dtype == DType::kFloat16 ? ir::FloatToHalf(v[i]) : ir::FloatToBFloat16(v[i]);
  return t;
}
std::vector<float> ValuesOf(const ir::Tensor& t) {
  std::vector<float> v;
  EXPECT_TRUE(ir::ReadFloatValues(t, &v)) << ir::DTypeName(t.dtype());
  return v;
}
float H(float v) { return ir::RoundToFloatType(v, DType::kFloat16); }

ir::Value* AddInput(ir::Graph& g, const std::string& name, std::vector<Dim> dims,
                    DType dtype = DType::kFloat16) {
  ir::Value* v = g.CreateValue(name);
  v->type = ir::TypeInfo::Tensor(dtype, std::move(dims));
  g.AddInput(v);
  return v;
}
ir::Node* Add(ir::Graph& g, const std::string& op, std::vector<ir::Value*> in,
              std::vector<std::string> out) {
  auto n = g.AddNode(op, in, out, "", op + "_" + out.front());
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  return *n;
}

// Runs `m` on one input "x" and returns its first output.
ir::Tensor RunOne(ir::Model m, ir::Tensor x) {
  auto interp = Interpreter::Create(std::move(m));
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  if (!interp.ok()) return {};
  auto out = (*interp)->Run({{"x", std::move(x)}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? (*out)[0].tensor : ir::Tensor();
}

TEST(Float16, EachTensorIsRoundedOnceAtItsBoundary) {
  // y = x * b + c with x, b, c float16: TensorRT writes t = x * b in FP16, then y. Rounding only
  // the final sum (FP32 through the chain) gives -5.6875; one rounding per tensor gives -5.69.
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1)});
  ir::Value* b = g.AddInitializer("b", Halves({1}, {-1.841796875f}));
  ir::Value* c = g.AddInitializer("c", Halves({1}, {-3.671875f}));
  ir::Node* mul = Add(g, "Mul", {x, b}, {"t"});
  ir::Node* add = Add(g, "Add", {mul->output(0), c}, {"y"});
  g.AddOutput(add->output(0));
  const ir::Tensor y = RunOne(std::move(m), Halves({1}, {1.095703125f}));
  ASSERT_EQ(y.dtype(), DType::kFloat16) << "a float16 graph output is handed out in float16";
  const float t = H(1.095703125f * -1.841796875f);
  EXPECT_EQ(ValuesOf(y)[0], H(t + -3.671875f));
  EXPECT_NE(ValuesOf(y)[0], H(1.095703125f * -1.841796875f + -3.671875f));
}

TEST(Float16, KernelsAccumulateInFloat32) {
  // ReduceSum of 4096 ones: float16 accumulation stalls at 2048 (2048 + 1 rounds back to 2048);
  // TensorRT's reductions accumulate in FP32 and round the result once.
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(4096)});
  ir::Node* sum = Add(g, "ReduceSum", {x}, {"y"});
  sum->SetAttr(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(sum->output(0));
  const ir::Tensor y = RunOne(std::move(m), Halves({4096}, std::vector<float>(4096, 1.0f)));
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(ValuesOf(y)[0], 4096.0f);
}

ir::Model QuantizeModel(float scale, int64_t opset, bool dequantize) {
  ir::Model m;
  m.SetOpset("", opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(4)});
  ir::Value* s = g.AddInitializer("s", Halves({}, {scale}));
  ir::Value* z = g.AddInitializer("z", ir::Tensor(DType::kInt8, {}));
  ir::Node* q = Add(g, "QuantizeLinear", {x, s, z}, {"q"});
  if (!dequantize) {
    g.AddOutput(q->output(0));
    return m;
  }
  ir::Node* dq = Add(g, "DequantizeLinear", {q->output(0), s, z}, {"y"});
  g.AddOutput(dq->output(0));
  return m;
}

TEST(Float16, QuantizeLinearDividesInFloat32AndRoundsHalfToEven) {
  // x / s = 75.4717 in FP32 -> 75; a float16 division gives 75.5 -> 76. 0.5 and 1.5 steps are
  // ties (to even: 0, 2); 0.5003 steps is 1 (onnxruntime's CPU float16 kernel truncates it to 0,
  // onnxruntime #18576 / #22741); 300 steps saturate to 127.
  const float s = 0.0711669921875f;
  const ir::Tensor q =
      RunOne(QuantizeModel(s, 21, false), Halves({4}, {5.37109375f, 0.5f * s, 1.5f * s, 300 * s}));
  ASSERT_EQ(q.dtype(), DType::kInt8);
  const int8_t* v = q.data_as<int8_t>();
  EXPECT_EQ(v[0], 75);
  EXPECT_EQ(v[1], std::nearbyint(H(0.5f * s) / s));
  EXPECT_EQ(v[2], std::nearbyint(H(1.5f * s) / s));
  EXPECT_EQ(v[3], 127);
  const ir::Tensor t = RunOne(QuantizeModel(0.0999755859375f, 21, false),
                              Halves({4}, {0.050018310546875f, -0.050018310546875f, 0, 0}));
  EXPECT_EQ(t.data_as<int8_t>()[0], 1);
  EXPECT_EQ(t.data_as<int8_t>()[1], -1);
}

TEST(Float16, DequantizeLinearRoundsTheProductOnceToTheScaleType) {
  const float s = 0.0711669921875f;
  const ir::Tensor y =
      RunOne(QuantizeModel(s, 21, true), Halves({4}, {5.37109375f, -1.0f, 2.5f, 300 * s}));
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  const std::vector<float> v = ValuesOf(y);
  EXPECT_EQ(v[0], H(75 * s));
  EXPECT_EQ(v[1], H(std::nearbyint(H(-1.0f) / s) * s));
  EXPECT_EQ(v[3], H(127 * s));
}

// y = MatMul(x, DQ(W_q, s)) [-> Q(s_out) -> DQ]: an INT8 layer in TensorRT.
ir::Model Int8MatMul(float w_scale, std::vector<int8_t> w_q, bool requantize, float out_scale) {
  ir::Model m;
  m.SetOpset("", 21);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1), Dim::Known(2)});
  ir::Value* wq = g.AddInitializer("wq", ir::Tensor::FromVector(DType::kInt8, {2, 1}, w_q));
  ir::Value* ws = g.AddInitializer("ws", Halves({}, {w_scale}));
  ir::Value* z = g.AddInitializer("z", ir::Tensor(DType::kInt8, {}));
  ir::Node* w = Add(g, "DequantizeLinear", {wq, ws, z}, {"w"});
  ir::Node* mm = Add(g, "MatMul", {x, w->output(0)}, {"mm"});
  if (!requantize) {
    g.AddOutput(mm->output(0));
    return m;
  }
  ir::Value* os = g.AddInitializer("os", Halves({}, {out_scale}));
  ir::Node* q = Add(g, "QuantizeLinear", {mm->output(0), os, z}, {"q"});
  g.AddOutput(q->output(0));
  return m;
}

TEST(Float16, DequantizeFusedIntoAnInt8LayerKeepsItsExactProduct) {
  // TensorRT's INT8 MatMul reads W_q itself: 74 * s + 96 * s is rounded once (9.43); rounding
  // each dequantized weight to float16 first would give 9.44.
  const float s = 0.05548095703125f;
  const ir::Tensor y = RunOne(Int8MatMul(s, {74, 96}, false, 0), Halves({1, 2}, {1, 1}));
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(ValuesOf(y)[0], H(74 * s + 96 * s));
  EXPECT_NE(ValuesOf(y)[0], H(H(74 * s) + H(96 * s)));
}

TEST(Float16, Int8LayerReadOnlyByQuantizeRequantizesFromFloat32) {
  // The epilogue quantizes the FP32 result of the layer; rounding the MatMul output to float16
  // first moves it across a rounding boundary of the output scale picked below.
  const float x0 = -1.7109375f, x1 = 0.63623046875f;
  // A power-of-two weight scale: the dequantized weights are exact in float16, so only the
  // MatMul output's rounding is under test (not the DequantizeLinear fusion above).
  const float ws = 0.015625f;
  const std::vector<int8_t> codes{-114, 21};
  const float w0 = -114 * ws, w1 = 21 * ws;
  const float mm = x0 * w0 + x1 * w1;
  // Pick an output scale where the two roundings quantize differently, with the FP32 quotient
  // clear of the tie (so the summation order inside the MatMul cannot matter).
  float out_scale = 0;
  for (float s = 0.03f; s < 0.1f; s += 1e-5f) {  // |mm| / s within the int8 range
    const float hs = H(s);
    const float frac = mm / hs - std::floor(mm / hs);
    if (std::nearbyint(mm / hs) != std::nearbyint(H(mm) / hs) && std::fabs(frac - 0.5f) > 1e-3f) {
      out_scale = hs;
      break;
    }
  }
  ASSERT_GT(out_scale, 0) << "no scale separates the two roundings of " << mm;
  const ir::Tensor q = RunOne(Int8MatMul(ws, codes, true, out_scale), Halves({1, 2}, {x0, x1}));
  ASSERT_EQ(q.dtype(), DType::kInt8);
  EXPECT_EQ(q.data_as<int8_t>()[0], std::nearbyint(mm / out_scale));
}

TEST(Float16, CastsConvertAndFloat32GraphOutputsStayFloat32) {
  // x (float16) -> Cast(float) -> Mul(0.1f float32) -> y float32: computed and kept in float32.
  // z = Cast(float16)(y): rounded. CastLike(y, x) rounds like Cast.
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1)});
  ir::Node* up = Add(g, "Cast", {x}, {"up"});
  up->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat)));
  ir::Value* c =
      g.AddInitializer("c", ir::Tensor::FromVector(DType::kFloat, {1}, std::vector<float>{0.1f}));
  ir::Node* mul = Add(g, "Mul", {up->output(0), c}, {"y"});
  ir::Node* down = Add(g, "Cast", {mul->output(0)}, {"z"});
  down->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)));
  ir::Node* like = Add(g, "CastLike", {mul->output(0), x}, {"w"});
  g.AddOutput(mul->output(0));
  g.AddOutput(down->output(0));
  g.AddOutput(like->output(0));
  auto interp = Interpreter::Create(std::move(m));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto out = (*interp)->Run({{"x", Halves({1}, {1.095703125f})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].tensor.dtype(), DType::kFloat);
  EXPECT_EQ((*out)[0].tensor.data_as<float>()[0], 1.095703125f * 0.1f);
  ASSERT_EQ((*out)[1].tensor.dtype(), DType::kFloat16);
  EXPECT_EQ(ValuesOf((*out)[1].tensor)[0], H(1.095703125f * 0.1f));
  ASSERT_EQ((*out)[2].tensor.dtype(), DType::kFloat16);
  EXPECT_EQ(ValuesOf((*out)[2].tensor)[0], H(1.095703125f * 0.1f));
}

TEST(Float16, Float16WeightsOfAFloat32GraphInputComputeInFloat32AndRoundAsTheWeights) {
  // A float16 initializer is widened once when the interpreter is built; the Identity that hands
  // it out as a graph output gives it back in float16, bit for bit.
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(2)});
  ir::Value* w = g.AddInitializer("w", Halves({2}, {0.1f, 65504.0f}));
  ir::Node* id = Add(g, "Identity", {w}, {"wid"});
  ir::Node* sum = Add(g, "Add", {x, id->output(0)}, {"y"});
  g.AddOutput(sum->output(0));
  g.AddOutput(id->output(0));
  auto interp = Interpreter::Create(std::move(m));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto out = (*interp)->Run({{"x", Halves({2}, {1.0f, 65504.0f})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ValuesOf((*out)[0].tensor)[0], H(1.0f + H(0.1f)));
  EXPECT_TRUE(std::isinf(ValuesOf((*out)[0].tensor)[1]))
      << "65504 + 65504 overflows float16 to inf";
  ASSERT_EQ((*out)[1].tensor.dtype(), DType::kFloat16);
  EXPECT_EQ((*out)[1].tensor.data_as<uint16_t>()[1], ir::FloatToHalf(65504.0f));
}

TEST(Float16, BFloat16RoundsToEightSignificantBits) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1)}, DType::kBFloat16);
  ir::Value* c = g.AddInitializer("c", Halves({1}, {1.0f / 256}, DType::kBFloat16));
  ir::Node* add = Add(g, "Add", {x, c}, {"y"});
  g.AddOutput(add->output(0));
  const ir::Tensor y = RunOne(std::move(m), Halves({1}, {1.0f}, DType::kBFloat16));
  ASSERT_EQ(y.dtype(), DType::kBFloat16);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 in bfloat16: to even, 1.
  EXPECT_EQ(ValuesOf(y)[0], 1.0f);
}

TEST(Float16, LayerNormalizationTypesOnlyItsFirstOutput) {
  // Y takes X's type; Mean and InvStdDev are float32 (stash_type) and keep all their bits.
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1), Dim::Known(3)});
  ir::Value* scale = g.AddInitializer("scale", Halves({3}, {1, 1, 1}));
  auto ln = g.AddNode("LayerNormalization", {x, scale}, {"y", "mean", "inv"}, "", "ln");
  ASSERT_TRUE(ln.ok());
  g.AddOutput((*ln)->output(0));
  g.AddOutput((*ln)->output(1));
  auto interp = Interpreter::Create(std::move(m));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  auto out = (*interp)->Run({{"x", Halves({1, 3}, {0.1f, 0.2f, 0.7f})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.dtype(), DType::kFloat16);
  ASSERT_EQ((*out)[1].tensor.dtype(), DType::kFloat);
  const double mean = (double{H(0.1f)} + H(0.2f) + H(0.7f)) / 3;
  EXPECT_NEAR((*out)[1].tensor.data_as<float>()[0], mean, 1e-7);
  EXPECT_NE((*out)[1].tensor.data_as<float>()[0], H(static_cast<float>(mean)));
}

}  // namespace
}  // namespace quantkit::runtime
