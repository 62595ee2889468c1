// passes::FoldBatchNorm and passes::QdqToFakeQuant: rewrites checked by running the graphs before
// and after through the runtime (the training graph in the interpreter's training mode).
#include "passes/fake_quant.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/interpreter.h"
#include "testing/tolerances.h"

namespace quantkit::passes {
namespace {

ir::Tensor Random(std::vector<int64_t> dims, unsigned seed, float lo = -1.f, float hi = 1.f) {
  ir::Tensor t(ir::DType::kFloat, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.mutable_data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

ir::Value* Input(ir::Graph& g, const std::string& name, std::vector<int64_t> dims) {
  ir::Value* v = g.CreateValue(name);
  std::vector<ir::Dim> d;
  for (int64_t x : dims) d.push_back(ir::Dim::Known(x));
  v->type = ir::TypeInfo::Tensor(ir::DType::kFloat, d);
  g.AddInput(v);
  return v;
}

std::vector<float> RunModel(ir::Model&& m, const ir::Tensor& x, bool training = false) {
  runtime::InterpreterOptions o;
  o.training = training;
  auto interp = runtime::Interpreter::Create(std::move(m), o);
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  auto out = (*interp)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  const ir::Tensor& t = out->at(0).tensor;
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

// x -> Conv(W, b) -> BatchNormalization -> y   (and optionally a second reader of the conv output)
ir::Model ConvBn(bool second_reader) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", {2, 3, 6, 6});
  ir::Value* w = g.AddInitializer("w", Random({4, 3, 3, 3}, 1));
  ir::Value* b = g.AddInitializer("b", Random({4}, 2));
  ir::Node* conv = *g.AddNode("Conv", {x, w, b}, {"c"}, "", "conv");
  std::vector<ir::Value*> bn_in{
      conv->output(0), g.AddInitializer("gamma", Random({4}, 3, 0.5f, 2.f)),
      g.AddInitializer("beta", Random({4}, 4)), g.AddInitializer("mean", Random({4}, 5)),
      g.AddInitializer("var", Random({4}, 6, 0.1f, 2.f))};
  ir::Node* bn = *g.AddNode("BatchNormalization", bn_in, {"y"}, "", "bn");
  g.AddOutput(bn->output(0));
  if (second_reader) g.AddOutput(conv->output(0));
  return m;
}

TEST(FoldBatchNorm, FoldsIntoTheConvKeepingTheOutputName) {
  const ir::Tensor x = Random({2, 3, 6, 6}, 9);
  const std::vector<float> before = RunModel(ConvBn(false), x);
  ir::Model m = ConvBn(false);
  auto folded = RunPass(m, FoldBatchNorm());
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded->Count(counter::kFolded), 1);
  ASSERT_EQ(m.graph->num_nodes(), 1u);
  EXPECT_EQ(m.graph->outputs().at(0)->name(), "y");
  EXPECT_EQ(m.graph->FindValue("gamma"), nullptr) << "BN constants only the fold read are removed";
  const std::vector<float> after = RunModel(std::move(m), x);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_NEAR(before[i], after[i], testing::kBnFoldAtol) << i;
}

TEST(FoldBatchNorm, LeavesAConvOutputOthersReadAlone) {
  ir::Model m = ConvBn(true);  // folding would change the second output
  auto folded = RunPass(m, FoldBatchNorm());
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(folded->Count(counter::kFolded), 0);
  EXPECT_FALSE(folded->changed);
  EXPECT_EQ(m.graph->num_nodes(), 2u);
}

// x -> Q/DQ(s_x) -> Conv(Q/DQ(W, per channel)) -> y, as InsertQdq writes it.
ir::Model QdqConv(int8_t zero_point) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", {1, 2, 5, 5});
  ir::Value* sx =
      g.AddInitializer("sx", ir::Tensor::FromVector<float>(ir::DType::kFloat, {}, {0.01f}));
  ir::Value* zx =
      g.AddInitializer("zx", ir::Tensor::FromVector<int8_t>(ir::DType::kInt8, {}, {zero_point}));
  ir::Node* qx = *g.AddNode("QuantizeLinear", {x, sx, zx}, {"x_q"}, "", "qx");
  ir::Node* dqx = *g.AddNode("DequantizeLinear", {qx->output(0), sx, zx}, {"x_dq"}, "", "dqx");
  ir::Value* w = g.AddInitializer("w", Random({3, 2, 3, 3}, 7));
  ir::Value* sw = g.AddInitializer(
      "sw", ir::Tensor::FromVector<float>(ir::DType::kFloat, {3}, {0.007f, 0.006f, 0.0075f}));
  ir::Value* zw =
      g.AddInitializer("zw", ir::Tensor::FromVector<int8_t>(ir::DType::kInt8, {3}, {0, 0, 0}));
  ir::Node* qw = *g.AddNode("QuantizeLinear", {w, sw, zw}, {"w_q"}, "", "qw");
  qw->SetAttr(ir::Attribute::Int("axis", 0));
  ir::Node* dqw = *g.AddNode("DequantizeLinear", {qw->output(0), sw, zw}, {"w_dq"}, "", "dqw");
  dqw->SetAttr(ir::Attribute::Int("axis", 0));
  ir::Node* conv = *g.AddNode("Conv", {dqx->output(0), dqw->output(0)}, {"y"}, "", "conv");
  g.AddOutput(conv->output(0));
  return m;
}

TEST(QdqToFakeQuant, ComputesWhatTheQdqGraphComputes) {
  const ir::Tensor x = Random({1, 2, 5, 5}, 11, -1.5f, 1.5f);  // some inputs beyond 127 * 0.01
  const std::vector<float> qdq = RunModel(QdqConv(0), x);
  ir::Model m = QdqConv(0);
  FakeQuantOptions o;
  o.recompute_weight_scales = false;  // the graph's scales are not max|w|/127: keep them
  auto report = RunPass(m, QdqToFakeQuant(o));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(passes::counter::kWeightPairs), 1);
  EXPECT_EQ(report->Count(passes::counter::kActivationPairs), 1);
  EXPECT_EQ(report->List(passes::list::kWeights), std::vector<std::string>{"w"});
  for (const ir::Node* n : m.graph->nodes()) {
    EXPECT_NE(n->op_type(), "QuantizeLinear");
    EXPECT_NE(n->op_type(), "DequantizeLinear");
  }
  EXPECT_NE(m.graph->FindValue("x_dq"), nullptr)
      << "the FakeQuantize output keeps the DQ output's name";
  const std::vector<float> fq = RunModel(std::move(m), x, /*training=*/true);
  ASSERT_EQ(qdq.size(), fq.size());
  for (size_t i = 0; i < qdq.size(); ++i) EXPECT_EQ(qdq[i], fq[i]) << i;
}

TEST(QdqToFakeQuant, RecomputedWeightScalesAndLearnedActivationScales) {
  ir::Model m = QdqConv(0);
  FakeQuantOptions o;
  o.learn_activation_scales = true;
  auto report = RunPass(m, QdqToFakeQuant(o));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::map<std::string, std::string> learned = LearnedActivationScales(*m.graph);
  ASSERT_EQ(learned.count("x"), 1u);
  const ir::Value* scale = m.graph->FindValue(learned.at("x"));
  ASSERT_NE(scale, nullptr);
  EXPECT_FLOAT_EQ(scale->initializer->data_as<float>()[0], 0.01f);
  for (const ir::Node* n : m.graph->nodes()) {
    if (n->op_type() != "FakeQuantize") continue;
    const bool weight = n->input(0)->name() == "w";
    EXPECT_EQ(n->num_inputs(), weight ? 1u : 2u) << "weights: no scale input (recomputed)";
    EXPECT_EQ(n->GetInt("lsq", 0), weight ? 0 : 1);
    EXPECT_EQ(n->GetInt("axis", -1), weight ? 0 : -1);
  }
}

TEST(QdqToFakeQuant, RejectsANonZeroZeroPointBeforeMutating) {
  ir::Model m = QdqConv(3);  // asymmetric activations: not what TensorRT takes nor QAT supports
  const size_t nodes = m.graph->num_nodes();
  auto report = RunPass(m, QdqToFakeQuant({}));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(report.status().message().find("zero point"), std::string::npos);
  EXPECT_EQ(m.graph->num_nodes(), nodes);
}

}  // namespace
}  // namespace quantkit::passes
