#include "passes/promote_constants.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "ir/verifier.h"
#include "onnx/import.h"

namespace quantkit::passes {
namespace {

ir::Model Load(const char* text) {
  ::onnx::ModelProto proto;
  const auto parsed = ::onnx::OnnxParser::Parse(proto, text);
  EXPECT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  auto model = onnx_io::ImportModelFromBytes(proto.SerializeAsString());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

size_t CountOps(ir::Graph& graph, const std::string& op) {
  size_t n = 0;
  ir::ForEachGraph(graph, [&](ir::Graph& g) {
    for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  });
  return n;
}

TEST(PromoteConstants, EveryFormBecomesANamedInitializer) {
  ir::Model model = Load(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x, bool c) => (float[3] y, int64 k) {
      w = Constant <value_floats = [1.0, 2.0, 3.0]> ()
      k = Constant <value_int = 7> ()
      t = Constant <value = float[1] {0.5}> ()
      a = Mul(x, w)
      y = If(c) <
        then_branch = then_g () => (float[3] p) {
          s = Constant <value_float = 2.0> ()
          p = Mul(a, s)
        },
        else_branch = else_g () => (float[3] q) { q = Add(a, t) }
      >
    })");
  auto report = RunPass(model, PromoteConstants());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->changed);
  EXPECT_EQ(CountOps(*model.graph, "Constant"), 0u);
  const ir::Value* w = model.graph->FindValue("w");
  ASSERT_TRUE(w && w->initializer);
  EXPECT_EQ(w->initializer->dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(w->initializer->data_as<float>()[2], 3.0f);
  EXPECT_EQ(w->uses().size(), 1u);
  // A graph output that was a Constant is now the initializer itself.
  const ir::Value* k = model.graph->FindValue("k");
  ASSERT_TRUE(k && k->initializer);
  EXPECT_TRUE(k->is_graph_output());
  EXPECT_EQ(k->initializer->data_as<int64_t>()[0], 7);
  // Subgraph constants become subgraph initializers; captures of promoted names still resolve.
  const ir::Graph* then_g = model.graph->nodes().back()->attr("then_branch")->graph();
  ASSERT_TRUE(then_g->FindValue("s") && then_g->FindValue("s")->initializer);
  EXPECT_TRUE(ir::Verify(model).ok()) << ir::Verify(model).ToString();
}

TEST(PromoteConstants, LeavesOtherNodesAlone) {
  ir::Model model = Load(R"(
    <ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
    g (float[3] x) => (float[3] y) {
      c = custom.Constant <value_float = 1.0> ()
      y = Add(x, c)
    })");
  auto report = RunPass(model, PromoteConstants());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->changed);
  EXPECT_EQ(report->Count(counter::kPromoted), 0);
  EXPECT_EQ(model.graph->num_nodes(), 2u);
}

}  // namespace
}  // namespace quantkit::passes
