#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/verifier.h"

namespace quantkit::ir {
namespace {

// x -> Relu -> a -> Sigmoid -> y ; a also feeds Add(a, w) -> z
struct SmallGraph {
  Graph g;
  Value* x = nullptr;
  Value* w = nullptr;
  Node* relu = nullptr;
  Node* sigmoid = nullptr;
  Node* add = nullptr;

  SmallGraph() {
    g.name = "small";
    x = g.CreateValue("x");
    x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Symbolic("N"), Dim::Known(4)});
    g.AddInput(x);
    w = g.AddInitializer("w", Tensor(DType::kFloat, {4}));
    relu = g.AddNode("Relu", {x}, {"a"}, "", "relu").value();
    sigmoid = g.AddNode("Sigmoid", {relu->output(0)}, {"y"}, "", "sigmoid").value();
    add = g.AddNode("Add", {relu->output(0), w}, {"z"}, "", "add").value();
    g.AddOutput(g.FindValue("y"));
    g.AddOutput(g.FindValue("z"));
  }
};

TEST(Graph, UseDefLinksAreMaintained) {
  SmallGraph s;
  Value* a = s.g.FindValue("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->producer(), s.relu);
  EXPECT_EQ(a->uses().size(), 2u);
  EXPECT_TRUE(s.w->is_constant());
  EXPECT_TRUE(s.x->is_graph_input());
  EXPECT_TRUE(s.g.FindValue("y")->is_graph_output());
  EXPECT_TRUE(Verify(s.g).ok()) << Verify(s.g).ToString();
}

TEST(Graph, TypeInfoRendersSymbolicDims) {
  SmallGraph s;
  EXPECT_EQ(s.x->type.ToString(), "float[N,4]");
}

TEST(Graph, RejectsSecondProducer) {
  SmallGraph s;
  auto r = s.g.AddNode("Relu", {s.x}, {"a"}, "", "dup");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(r.status().message().find("'a' is already defined"), std::string::npos);
}

TEST(Graph, RemoveNodeAndReconnectBypassesNode) {
  SmallGraph s;
  ASSERT_TRUE(s.g.RemoveNodeAndReconnect(s.relu, 0, 0).ok());
  EXPECT_EQ(s.sigmoid->input(0), s.x);
  EXPECT_EQ(s.add->input(0), s.x);
  EXPECT_EQ(s.g.FindValue("a"), nullptr);
  EXPECT_EQ(s.x->uses().size(), 2u);
  EXPECT_TRUE(Verify(s.g).ok());
}

TEST(Graph, RemoveNodeRefusesWhileOutputsUsed) {
  SmallGraph s;
  Status st = s.g.RemoveNode(s.relu);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(s.g.num_nodes(), 3u);  // nothing changed
  EXPECT_TRUE(Verify(s.g).ok());
}

TEST(Graph, ReplaceAllUsesWithUpdatesGraphOutputs) {
  SmallGraph s;
  Value* y = s.g.FindValue("y");
  Value* z = s.g.FindValue("z");
  s.g.ReplaceAllUsesWith(y, z);
  EXPECT_EQ(s.g.outputs()[0], z);
  ASSERT_TRUE(s.g.RemoveNode(s.sigmoid).ok());
  EXPECT_TRUE(Verify(s.g).ok());
}

TEST(Graph, InsertNodeBeforeKeepsOrder) {
  SmallGraph s;
  Node* n = s.g.InsertNodeBefore(s.sigmoid, "Identity", {s.relu->output(0)}, {"a2"}).value();
  s.g.SetNodeInput(s.sigmoid, 0, n->output(0));
  auto nodes = s.g.nodes();
  EXPECT_EQ(nodes[1], n);
  EXPECT_EQ(s.g.FindValue("a")->uses().size(), 2u);  // Identity and Add
  EXPECT_TRUE(Verify(s.g).ok());
}

TEST(Graph, TopologicalOrderSortsOutOfOrderNodes) {
  Graph g;
  Value* x = g.CreateValue("x");
  g.AddInput(x);
  // Consumer is added before its producer.
  Value* mid = g.CreateValue("mid");
  Node* consumer = g.AddNode("Relu", {mid}, {"y"}, "", "consumer").value();
  Node* producer = g.AddNode("Neg", {x}, {"mid"}, "", "producer").value();
  g.AddOutput(g.FindValue("y"));
  auto order = g.TopologicalOrder();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ((*order)[0], producer);
  EXPECT_EQ((*order)[1], consumer);
  ASSERT_TRUE(g.SortTopologically().ok());
  EXPECT_EQ(g.nodes()[0], producer);
}

TEST(Verifier, I2UndefinedInput) {
  Graph g;
  g.name = "bad";
  Value* ghost = g.CreateValue("ghost");
  (void)g.AddNode("Relu", {ghost}, {"y"}, "", "r").value();
  g.AddOutput(g.FindValue("y"));
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("I2"), std::string::npos);
  EXPECT_NE(st.message().find("'ghost'"), std::string::npos);
}

TEST(Verifier, I4Cycle) {
  Graph g;
  Value* x = g.CreateValue("x");
  g.AddInput(x);
  Value* b = g.CreateValue("b");
  Node* n1 = g.AddNode("Add", {x, b}, {"a"}, "", "n1").value();
  (void)g.AddNode("Relu", {n1->output(0)}, {"b"}, "", "n2").value();
  g.AddOutput(g.FindValue("a"));
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cycle"), std::string::npos);
}

TEST(Verifier, I5OpsetMustCoverDomains) {
  Model m;
  m.SetOpset("", 17);
  Value* x = m.graph->CreateValue("x");
  m.graph->AddInput(x);
  (void)m.graph->AddNode("Custom", {x}, {"y"}, "com.example", "c").value();
  m.graph->AddOutput(m.graph->FindValue("y"));
  Status st = Verify(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("com.example"), std::string::npos);
  m.SetOpset("com.example", 1);
  EXPECT_TRUE(Verify(m).ok());
}

TEST(Verifier, I6PerAxisScaleMustMatchAxis) {
  Graph g;
  Value* x = g.CreateValue("x");
  x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(8), Dim::Known(3)});
  g.AddInput(x);
  Value* s = g.AddInitializer("s", Tensor(DType::kFloat, {4}));
  Node* q = g.AddNode("QuantizeLinear", {x, s}, {"q"}, "", "q").value();
  q->SetAttr(Attribute::Int("axis", 0));
  g.AddOutput(q->output(0));
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("I6"), std::string::npos);
  // Fix the scale length: 8 channels on axis 0.
  s->initializer = Tensor(DType::kFloat, {8});
  s->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(8)});
  EXPECT_TRUE(Verify(g).ok());
}

TEST(Verifier, OuterScopeCaptureMustExistInParent) {
  Graph parent;
  Value* outer = parent.CreateValue("outer");
  parent.AddInput(outer);
  Graph body(&parent);
  Value* cap = body.CreateValue("outer");
  body.MarkOuterScope(cap);
  (void)body.AddNode("Relu", {cap}, {"r"}).value();
  body.AddOutput(body.FindValue("r"));
  EXPECT_TRUE(Verify(body).ok());
  Graph orphan(&parent);
  Value* bad = orphan.CreateValue("nowhere");
  orphan.MarkOuterScope(bad);
  EXPECT_FALSE(Verify(orphan).ok());
}

}  // namespace
}  // namespace quantkit::ir
