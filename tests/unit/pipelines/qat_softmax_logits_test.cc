// Where QAT's --loss kl is taken (pipelines/qat: SoftmaxLogits): the logits of a Softmax first
// output and its class axis, found in the plain form and in the opset upgrade's
// Reshape(Softmax(Flatten(x, k)), Shape(x)) (how PP-OCRv4 rec's opset-12 Softmax reaches the
// student), and refused where the softmax is not one per position over a single axis.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "ir/graph.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {
namespace {

// Input x of `type` (last axis 5) and logits = x + b.
ir::Value* AddLogits(ir::Graph& g, const ir::TypeInfo& type) {
  ir::Value* x = g.CreateValue("x");
  x->type = type;
  g.AddInput(x);
  ir::Value* b = g.AddInitializer(
      "b", ir::Tensor::FromVector(ir::DType::kFloat, {5}, std::vector<float>(5, 0.1f)));
  return (*g.AddNode("Add", {x, b}, {"logits"}, "", "add"))->output(0);
}

// x: float[N, T, 5] -> logits = x + b -> softmax; `upgraded` writes the upgrade's four nodes.
ir::Model SoftmaxModel(int64_t opset, std::optional<int64_t> axis, bool upgraded = false,
                       int64_t flatten_axis = 2) {
  ir::Model m;
  m.SetOpset("", opset);
  ir::Graph& g = *m.graph;
  const ir::TypeInfo type = ir::TypeInfo::Tensor(
      ir::DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Symbolic("T"), ir::Dim::Known(5)});
  ir::Value* logits = AddLogits(g, type);
  ir::Value* y = nullptr;
  if (!upgraded) {
    ir::Node* s = *g.AddNode("Softmax", {logits}, {"y"}, "", "softmax");
    if (axis) s->SetAttr(ir::Attribute::Int("axis", *axis));
    y = s->output(0);
  } else {
    ir::Node* flatten = *g.AddNode("Flatten", {logits}, {"flat"}, "", "flatten");
    flatten->SetAttr(ir::Attribute::Int("axis", flatten_axis));
    ir::Node* s = *g.AddNode("Softmax", {flatten->output(0)}, {"sm2d"}, "", "softmax");
    s->SetAttr(ir::Attribute::Int("axis", -1));
    ir::Node* shape = *g.AddNode("Shape", {logits}, {"shape"}, "", "shape");
    y = (*g.AddNode("Reshape", {s->output(0), shape->output(0)}, {"y"}, "", "reshape"))->output(0);
  }
  y->type = type;
  g.AddOutput(y);
  return m;
}

TEST(QatSoftmaxLogitsTest, APerPositionSoftmaxGivesItsInputAndAxis) {
  for (const auto& [opset, axis] : {std::pair<int64_t, std::optional<int64_t>>{13, std::nullopt},
                                    {13, -1},
                                    {13, 2},
                                    {12, 2},
                                    {12, -1}}) {
    const std::optional<train::DistillTarget> t =
        SoftmaxLogits(SoftmaxModel(opset, axis), SoftmaxModel(opset, axis));
    ASSERT_TRUE(t.has_value()) << "opset " << opset << " axis " << axis.value_or(99);
    EXPECT_EQ(t->student, "logits");
    EXPECT_EQ(t->teacher, "logits");
    EXPECT_EQ(t->axis, 2);
  }
  // Opset 13's softmax over the middle axis is one per (batch, class) over time: that axis.
  EXPECT_EQ(SoftmaxLogits(SoftmaxModel(13, 1), SoftmaxModel(13, 1))->axis, 1);
}

TEST(QatSoftmaxLogitsTest, TheOpsetUpgradesFormIsFoundAndMatchesThePlainOne) {
  const std::optional<train::DistillTarget> t =
      SoftmaxLogits(SoftmaxModel(13, {}, true), SoftmaxModel(12, 2));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->student, "logits");
  EXPECT_EQ(t->axis, 2);
}

// x: float[N, 5] -> logits = x + b -> Softmax(axis 1): a classifier's probabilities.
ir::Model ClassifierModel() {
  ir::Model m;
  m.SetOpset("", 13);
  const ir::TypeInfo type =
      ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Known(5)});
  ir::Node* s = *m.graph->AddNode("Softmax", {AddLogits(*m.graph, type)}, {"probs"}, "", "softmax");
  s->SetAttr(ir::Attribute::Int("axis", 1));
  s->output(0)->type = type;
  m.graph->AddOutput(s->output(0));
  return m;
}

TEST(QatSoftmaxLogitsTest, CrossEntropyReadsAClassifiersLogitsNotItsProbabilities) {
  Graphs graphs{ClassifierModel(), ClassifierModel(), {}, {}};
  train::TrainerOptions topts;
  topts.label_weight = 1.0;
  topts.distill_weight = 0.0;
  QatResult result;
  ChooseLogitsTargets(graphs, &topts, &result);
  EXPECT_EQ(topts.label_logits, "logits");
  EXPECT_NE(result.label_on.find("'logits'"), std::string::npos) << result.label_on;
  EXPECT_TRUE(topts.distill_on.student.empty()) << "no KL asked for";
  // Without cross-entropy nothing is chosen for it.
  train::TrainerOptions mse;
  QatResult none;
  ChooseLogitsTargets(graphs, &mse, &none);
  EXPECT_TRUE(mse.label_logits.empty());
  EXPECT_TRUE(none.label_on.empty());
  // A per-position softmax ([N, T, 5]) has no class axis per sample: cross-entropy stays on the
  // first output (whose labels the data check refuses), KL still goes to the logits.
  Graphs sequence{SoftmaxModel(13, 2), SoftmaxModel(13, 2), {}, {}};
  train::TrainerOptions both;
  both.label_weight = 1.0;
  both.distill = train::DistillLoss::kKl;
  QatResult seq;
  ChooseLogitsTargets(sequence, &both, &seq);
  EXPECT_TRUE(both.label_logits.empty());
  EXPECT_EQ(both.distill_on.student, "logits");
}

TEST(QatSoftmaxLogitsTest, ASoftmaxOverSeveralAxesOrNoneIsRefused) {
  // Opset 12 flattens from axis 1: one softmax over [T * 5] per sample, not per position.
  EXPECT_FALSE(
      SoftmaxLogits(SoftmaxModel(12, std::nullopt), SoftmaxModel(12, std::nullopt)).has_value());
  EXPECT_FALSE(SoftmaxLogits(SoftmaxModel(12, 1), SoftmaxModel(12, 1)).has_value());
  // The upgraded form flattening from axis 1 is the same: refused.
  EXPECT_FALSE(
      SoftmaxLogits(SoftmaxModel(13, {}, true, 1), SoftmaxModel(13, {}, true, 1)).has_value());
  // Axes that differ between student and teacher: refused.
  EXPECT_FALSE(SoftmaxLogits(SoftmaxModel(13, 1), SoftmaxModel(13, 2)).has_value());
  // An output that is no softmax.
  ir::Model plain = SoftmaxModel(13, 2);
  ir::Graph& g = *plain.graph;
  g.FindValue("logits")->type =
      g.outputs().front()->type;  // a shaped output: refused for its producer
  g.SetOutput(0, g.FindValue("logits"));
  EXPECT_FALSE(SoftmaxLogits(plain, plain).has_value());
}

}  // namespace
}  // namespace quantkit::pipelines::qat
