// ir::CloneModel: a clone is indistinguishable from its original (the same exported bytes, the
// same rewrite by every pass, the same use order) and independent of it (rewriting one leaves
// the other as it was). A fallback search simulates every trial on a clone of the loaded float
// model (analysis::BuildSimulationModel), so a clone that differed would quantize a different
// graph than the one a user exports.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <string>

#include "analysis/model_loading.h"
#include "ir/clone.h"
#include "ir/verifier.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "passes/apply_plan.h"
#include "passes/strip_qdq.h"

namespace quantkit::ir {
namespace {

std::string Bytes(const Model& model) {
  auto bytes = onnx_io::ExportModelToBytes(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

class CloneZoo : public testing::TestWithParam<std::string> {};

TEST_P(CloneZoo, SameBytesSameRewriteAndIndependent) {
  const std::string path = std::string(QK_SOURCE_DIR) + "/models/zoo/" + GetParam() + ".onnx";
  auto original = analysis::LoadModelForQuantization(path);
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  const std::string before = Bytes(*original);
  auto clone = CloneModel(*original);
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  EXPECT_TRUE(Verify(*clone).ok());
  EXPECT_EQ(Bytes(*clone), before);
  EXPECT_EQ(clone->source_path, path);

  // The rewrite a workflow does: on the clone and on a fresh load of the file, the same bytes.
  auto fresh = analysis::LoadModelForQuantization(path);
  ASSERT_TRUE(fresh.ok());
  const bool qdq = GetParam() == "resnet_small_qat";
  quant::QuantPlan plan_a, plan_b;  // empty: ApplyPlan fills and pairs the weights
  const passes::StripQdq strip;
  const passes::ApplyPlan apply_a(&plan_a, {}), apply_b(&plan_b, {});
  auto on_clone = passes::RunPass(*clone, qdq ? static_cast<const passes::Pass&>(strip) : apply_a);
  auto on_fresh = passes::RunPass(*fresh, qdq ? static_cast<const passes::Pass&>(strip) : apply_b);
  ASSERT_TRUE(on_clone.ok()) << on_clone.status().ToString();
  ASSERT_TRUE(on_fresh.ok());
  EXPECT_TRUE(on_clone->changed);
  EXPECT_EQ(Bytes(*clone), Bytes(*fresh));
  EXPECT_EQ(Bytes(*original), before) << "rewriting the clone changed the original";
}

INSTANTIATE_TEST_SUITE_P(Zoo, CloneZoo,
                         testing::Values("plain_cnn", "resnet_small", "vit_tiny",
                                         "resnet_small_qat"));

TEST(CloneModel, KeepsUseOrderSubgraphsAndCaptures) {
  ::onnx::ModelProto proto;
  ASSERT_TRUE(::onnx::OnnxParser::Parse(proto, R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x) => (float[2] y, float[2] z) {
      t = Relu(x)
      u = Neg(t)
      y = If(c) <
        then_branch = then_g () => (float[2] a) { a = Neg(t) },
        else_branch = else_g () => (float[2] b) { b = Identity(x) }
      >
      z = Add(t, u)
    })")
                  .IsOK());
  auto model = onnx_io::ImportModelFromBytes(proto.SerializeAsString());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Graph& g = *model->graph;
  // Scramble t's use order the way passes do: re-point Neg's input, which appends its use last.
  Node* neg = g.nodes()[1];
  g.SetNodeInput(neg, 0, g.FindValue("t"));
  ASSERT_EQ(g.FindValue("t")->uses().back().node, neg);

  auto clone = CloneModel(*model);
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  EXPECT_EQ(Bytes(*clone), Bytes(*model));
  const Value* t = clone->graph->FindValue("t");
  ASSERT_EQ(t->uses().size(), g.FindValue("t")->uses().size());
  for (size_t i = 0; i < t->uses().size(); ++i) {
    EXPECT_EQ(t->uses()[i].node->name + t->uses()[i].node->op_type(),
              g.FindValue("t")->uses()[i].node->name + g.FindValue("t")->uses()[i].node->op_type());
    EXPECT_EQ(t->uses()[i].input_index, g.FindValue("t")->uses()[i].input_index);
    EXPECT_EQ(t->uses()[i].node->owner(), clone->graph.get());
  }
  const Node* if_node = clone->graph->nodes()[2];
  const Graph* then_g = if_node->attr("then_branch")->graph();
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->parent(), clone->graph.get());
  EXPECT_NE(then_g, g.nodes()[2]->attr("then_branch")->graph());
  ASSERT_NE(then_g->FindValue("t"), nullptr);
  EXPECT_TRUE(then_g->FindValue("t")->is_outer_scope());
  EXPECT_TRUE(Verify(*clone).ok());
}

}  // namespace
}  // namespace quantkit::ir
