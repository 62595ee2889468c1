#include "analysis/simulate.h"

#include <gtest/gtest.h>

#include "passes/fold_weight_qdq.h"
#include "quant/params.h"
#include "runtime/interpreter.h"

namespace quantkit::analysis {
namespace {

using ir::Dim;
using ir::DType;
using ir::Tensor;

// y = Gemm(x, W, B, transB=1): x float[2, 3], W [4, 3] with values that round differently per
// channel, B float (stays float).
ir::Model GemmModel() {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(DType::kFloat, {Dim::Known(2), Dim::Known(3)});
  g.AddInput(x);
  ir::Value* w = g.AddInitializer(
      "W", Tensor::FromVector<float>(DType::kFloat, {4, 3},
                                     {0.31f, -1.7f, 0.05f, 2.5f, 0.013f, -0.9f, -0.2f, 0.21f,
                                      0.199f, 1e-3f, -3e-3f, 2e-3f}));
  ir::Value* b = g.AddInitializer(
      "B", Tensor::FromVector<float>(DType::kFloat, {4}, {0.1f, -0.2f, 0.3f, 0.0f}));
  auto n = g.AddNode("Gemm", {x, w, b}, {"y"}, "", "gemm");
  EXPECT_TRUE(n.ok());
  (*n)->SetAttr(ir::Attribute::Int("transB", 1));
  g.AddOutput((*n)->output(0));
  return m;
}

quant::QuantPlan Plan() {
  quant::QuantPlan plan;
  plan.SetActivationAmax("x", 2.0f, "max");
  return plan;
}

std::vector<float> RunModel(ir::Model m) {
  auto it = runtime::Interpreter::Create(std::move(m));
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  auto out =
      (*it)->Run({{"x", Tensor::FromVector<float>(DType::kFloat, {2, 3},
                                                  {0.5f, -1.0f, 3.0f, 1.234f, 0.0f, -0.77f})}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  const float* y = (*out)[0].tensor.data_as<float>();
  return std::vector<float>(y, y + (*out)[0].tensor.numel());
}

int CountOps(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

TEST(Simulate, FoldedWeightsGiveTheSameOutputsAsTheQdqModel) {
  ir::Model qdq = GemmModel();
  quant::QuantPlan plan = Plan();
  auto report = passes::RunPass(qdq, passes::ApplyPlan(&plan, {}));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(passes::counter::kActivationPairs), 1);
  EXPECT_EQ(report->Count(passes::counter::kWeightPairs), 1);
  ASSERT_NE(plan.Find("W"), nullptr);  // weight scales filled per channel
  EXPECT_EQ(plan.Find("W")->scale.size(), 4u);

  ir::Model folded = GemmModel();
  quant::QuantPlan plan2 = Plan();
  ASSERT_TRUE(passes::RunPass(folded, passes::ApplyPlan(&plan2, {})).ok());
  auto n = passes::RunPass(folded, passes::FoldWeightQdq());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->Count(passes::counter::kFolded), 1);
  EXPECT_EQ(CountOps(folded, "QuantizeLinear"), 1);  // only the activation's remains
  EXPECT_EQ(CountOps(qdq, "QuantizeLinear"), 2);

  // The folded weights are the per-channel fake quantization of W.
  const ir::Node* gemm = nullptr;
  for (const ir::Node* node : folded.graph->nodes()) {
    if (node->op_type() == "Gemm") gemm = node;
  }
  ASSERT_NE(gemm, nullptr);
  ASSERT_TRUE(gemm->input(1)->initializer.has_value());
  const float* fq = gemm->input(1)->initializer->data_as<float>();
  const quant::TensorQuant& w = *plan2.Find("W");
  const ir::Model original = GemmModel();
  const float* orig = original.graph->FindValue("W")->initializer->data_as<float>();
  for (int i = 0; i < 12; ++i) {
    const float s = w.scale[i / 3];
    EXPECT_EQ(fq[i], quant::Dequantize(quant::QuantizeValue(orig[i], s, 0, {-128, 127}), s, 0))
        << i;
  }
  // Same float operations on both sides: bit-identical outputs.
  EXPECT_EQ(RunModel(std::move(qdq)), RunModel(std::move(folded)));
}

TEST(Simulate, FloatNodesGetNoQdq) {
  ir::Model m = GemmModel();
  quant::QuantPlan plan = Plan();
  plan.float_nodes["gemm"] = "kept in float";
  auto report = passes::RunPass(m, passes::ApplyPlan(&plan, {}));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->Count(passes::counter::kActivationPairs) +
                report->Count(passes::counter::kWeightPairs),
            0);
  EXPECT_EQ(CountOps(m, "QuantizeLinear"), 0);
  // And the simulation then equals the float model.
  EXPECT_EQ(RunModel(std::move(m)), RunModel(GemmModel()));
}

TEST(Simulate, QuantizationChangesTheOutput) {
  ir::Model m = GemmModel();
  quant::QuantPlan plan = Plan();
  ASSERT_TRUE(passes::RunPass(m, passes::ApplyPlan(&plan, {})).ok());
  // x = 3.0 saturates at amax 2 (127 * 2/127): the simulated output must differ from FP32.
  EXPECT_NE(RunModel(std::move(m)), RunModel(GemmModel()));
}

TEST(Simulate, ParsePlacementMode) {
  EXPECT_EQ(*passes::ParsePlacementPolicy("plan"), PlacementMode::kPlan);
  EXPECT_EQ(*passes::ParsePlacementPolicy("tensorrt"), PlacementMode::kTensorRT);
  EXPECT_FALSE(passes::ParsePlacementPolicy("bogus").ok());
}

}  // namespace
}  // namespace quantkit::analysis
