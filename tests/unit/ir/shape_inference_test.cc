// Shape inference checked against the ONNX node tests (each declares its outputs' types, which
// are hidden before inference and compared after), plus hand-written cases for symbolic dims.
#include "ir/shape_inference.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "onnx/import.h"

namespace quantkit::ir {
namespace {

// "" when `inferred` agrees with `declared` wherever both are known, else the disagreement.
std::string Disagreement(const TypeInfo& declared, const TypeInfo& inferred) {
  if (declared.dtype != inferred.dtype) {
    return "dtype " + std::string(DTypeName(inferred.dtype)) + " vs declared " +
           std::string(DTypeName(declared.dtype));
  }
  if (!inferred.has_shape || !declared.has_shape) return "";
  if (declared.dims.size() != inferred.dims.size()) {
    return inferred.ToString() + " vs declared " + declared.ToString();
  }
  for (size_t i = 0; i < declared.dims.size(); ++i) {
    const Dim& d = declared.dims[i];
    const Dim& x = inferred.dims[i];
    if (d.is_known() && x.is_known() && d.value != x.value) {
      return inferred.ToString() + " vs declared " + declared.ToString();
    }
  }
  return "";
}

TEST(ShapeInference, AgreesWithEveryNodeTestItCovers) {
  const std::string root = "/usr/share/libonnx-testdata/data/node";
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) GTEST_SKIP() << "libonnx-testdata not installed";
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) names.push_back(e->d_name);
  closedir(dir);
  std::sort(names.begin(), names.end());
  int outputs = 0, shaped = 0, mismatches = 0;
  for (const std::string& name : names) {
    const std::string path = root + "/" + name + "/model.onnx";
    if (access(path.c_str(), R_OK) != 0) continue;
    auto model = onnx_io::ImportModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Graph& g = *model->graph;
    // Hide the declared types of everything a node produces, then infer them back.
    std::vector<std::pair<Value*, TypeInfo>> declared;
    for (Node* n : g.nodes()) {
      for (Value* v : n->outputs()) {
        if (v == nullptr) continue;
        if (v->type.kind == TypeInfo::Kind::kTensor) declared.emplace_back(v, v->type);
        v->type = TypeInfo{};
        v->has_value_info = false;
      }
    }
    g.ClearOutputs();  // outputs count as declared; the comparison below needs them undeclared
    ASSERT_TRUE(InferShapes(*model).ok());
    for (auto& [v, type] : declared) {
      ++outputs;
      if (v->type.kind != TypeInfo::Kind::kTensor || !v->type.has_shape) continue;
      ++shaped;
      const std::string why = Disagreement(type, v->type);
      if (!why.empty()) {
        ++mismatches;
        ADD_FAILURE() << name << ": '" << v->name() << "' inferred " << why;
      }
    }
  }
  std::printf("node tests: %d node outputs, %d shapes inferred, %d mismatches\n", outputs, shaped,
              mismatches);
  EXPECT_EQ(mismatches, 0);
  // Coverage floor: many node tests feed shape operands as graph inputs (not constant), which
  // leaves those outputs rank-unknown by design; about half get a full shape.
  EXPECT_GT(shaped, outputs * 2 / 5);
}

TEST(ShapeInference, SymbolicDimsFlowThroughACnnHead) {
  Model m;
  m.SetOpset("", 17);
  Graph& g = *m.graph;
  Value* x = g.CreateValue("x");
  x->type = TypeInfo::Tensor(DType::kFloat,
                             {Dim::Symbolic("N"), Dim::Known(3), Dim::Known(32), Dim::Known(32)});
  g.AddInput(x);
  Value* w = g.AddInitializer("w", Tensor(DType::kFloat, {8, 3, 3, 3}));
  Node* conv = g.AddNode("Conv", {x, w}, {"c"}).value();
  conv->SetAttr(Attribute::Ints("pads", {1, 1, 1, 1}));
  conv->SetAttr(Attribute::Ints("strides", {2, 2}));
  Node* pool = g.AddNode("GlobalAveragePool", {conv->output(0)}, {"p"}).value();
  Node* flat = g.AddNode("Flatten", {pool->output(0)}, {"f"}).value();
  Value* fc = g.AddInitializer("fc", Tensor(DType::kFloat, {10, 8}));
  Node* gemm = g.AddNode("Gemm", {flat->output(0), fc}, {"y"}).value();
  gemm->SetAttr(Attribute::Int("transB", 1));
  Value* b = g.CreateValue("b");
  b->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(10)});
  g.AddInput(b);
  Node* add = g.AddNode("Add", {gemm->output(0), b}, {"z"}).value();
  Node* q = g.AddNode("QuantizeLinear",
                      {add->output(0), g.AddInitializer("s", Tensor(DType::kFloat, {})),
                       g.AddInitializer("zp", Tensor(DType::kInt8, {}))},
                      {"q"})
                .value();
  ShapeInferenceStats stats;
  ASSERT_TRUE(InferShapes(m, &stats).ok());
  EXPECT_EQ(conv->output(0)->type.ToString(), "float[N,8,16,16]");
  EXPECT_EQ(flat->output(0)->type.ToString(), "float[N,8]");
  EXPECT_EQ(add->output(0)->type.ToString(), "float[N,10]");
  EXPECT_EQ(q->output(0)->type.ToString(), "int8[N,10]");
  EXPECT_EQ(stats.inferred, 6);
  EXPECT_EQ(stats.unknown, 0);
}

TEST(ShapeInference, DeclaredValueInfoIsKeptAndUnknownOpsFallBackToIt) {
  Model m;
  m.SetOpset("", 17);
  m.SetOpset("custom", 1);
  Graph& g = *m.graph;
  Value* x = g.CreateValue("x");
  x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(2)});
  g.AddInput(x);
  Node* custom = g.AddNode("Mystery", {x}, {"m"}, "custom").value();
  custom->output(0)->type = TypeInfo::Tensor(DType::kFloat, {Dim::Symbolic("K")});
  custom->output(0)->has_value_info = true;
  Node* relu = g.AddNode("Relu", {custom->output(0)}, {"y"}).value();
  ASSERT_TRUE(InferShapes(m).ok());
  EXPECT_EQ(custom->output(0)->type.ToString(), "float[K]");
  EXPECT_EQ(relu->output(0)->type.ToString(), "float[K]");
  EXPECT_FALSE(relu->output(0)->has_value_info);  // inferred types are not exported
}

// The node tests cover RNN/GRU/LSTM with fixed shapes; here a symbolic batch, batch-first layout
// and a bidirectional LSTM's three outputs.
TEST(ShapeInference, RecurrentOutputsFollowLayoutAndDirection) {
  Model m;
  m.SetOpset("", 14);
  Graph& g = *m.graph;
  Value* x = g.CreateValue("x");
  x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(7), Dim::Symbolic("B"), Dim::Known(4)});
  g.AddInput(x);
  Value* w = g.AddInitializer("w", Tensor(DType::kFloat, {1, 3 * 5, 4}));
  Value* r = g.AddInitializer("r", Tensor(DType::kFloat, {1, 3 * 5, 5}));
  Node* gru = g.AddNode("GRU", {x, w, r}, {"y", "y_h"}).value();
  gru->SetAttr(Attribute::Int("hidden_size", 5));
  Value* xb = g.CreateValue("xb");
  xb->type = TypeInfo::Tensor(DType::kFloat, {Dim::Symbolic("B"), Dim::Known(7), Dim::Known(4)});
  g.AddInput(xb);
  Value* w2 = g.AddInitializer("w2", Tensor(DType::kFloat, {2, 4 * 3, 4}));
  Value* r2 = g.AddInitializer("r2", Tensor(DType::kFloat, {2, 4 * 3, 3}));
  Node* lstm = g.AddNode("LSTM", {xb, w2, r2}, {"ly", "ly_h", "ly_c"}).value();
  lstm->SetAttr(Attribute::Int("hidden_size", 3));
  lstm->SetAttr(Attribute::Int("layout", 1));
  lstm->SetAttr(Attribute::String("direction", "bidirectional"));
  ASSERT_TRUE(InferShapes(m).ok());
  EXPECT_EQ(gru->output(0)->type.ToString(), "float[7,1,B,5]");
  EXPECT_EQ(gru->output(1)->type.ToString(), "float[1,B,5]");
  EXPECT_EQ(lstm->output(0)->type.ToString(), "float[B,7,2,3]");
  EXPECT_EQ(lstm->output(1)->type.ToString(), "float[B,2,3]");
  EXPECT_EQ(lstm->output(2)->type.ToString(), "float[B,2,3]");
}

// If's outputs come from its branches: the shape where both agree, the dtype alone where only
// it does, nothing where the dtypes differ.
TEST(ShapeInference, IfOutputsComeFromBothBranches) {
  Model m;
  m.SetOpset("", 17);
  Graph& g = *m.graph;
  Value* cond = g.CreateValue("cond");
  cond->type = TypeInfo::Tensor(DType::kBool, {});
  g.AddInput(cond);
  Value* x = g.CreateValue("x");
  x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(2), Dim::Known(3)});
  g.AddInput(x);
  Node* n = g.AddNode("If", {cond}, {"same", "rank", "mixed"}).value();
  const char* names[] = {"then_branch", "else_branch"};
  for (int i = 0; i < 2; ++i) {
    Attribute a;
    a.name = names[i];
    a.type = AttrType::kGraph;
    a.graphs.push_back(std::make_unique<Graph>(&g));
    Graph& sub = *a.graphs.back();
    Value* cap = sub.CreateValue("x");
    sub.MarkOuterScope(cap);
    const std::string k = std::to_string(i);
    sub.AddOutput(sub.AddNode("Relu", {cap}, {"same" + k}).value()->output(0));
    // then [2, 3], else [3, 2]
    Node* second = i == 0 ? sub.AddNode("Abs", {cap}, {"rank" + k}).value()
                          : sub.AddNode("Transpose", {cap}, {"rank" + k}).value();
    sub.AddOutput(second->output(0));
    Node* third = sub.AddNode("Cast", {cap}, {"mixed" + k}).value();
    third->SetAttr(
        Attribute::Int("to", static_cast<int64_t>(i == 0 ? DType::kFloat : DType::kInt64)));
    sub.AddOutput(third->output(0));
    n->SetAttr(std::move(a));
  }
  ASSERT_TRUE(InferShapes(m).ok());
  EXPECT_EQ(n->output(0)->type.ToString(), "float[2,3]");
  EXPECT_EQ(n->output(1)->type.dtype, DType::kFloat);
  EXPECT_FALSE(n->output(1)->type.has_shape);
  EXPECT_EQ(n->output(2)->type.dtype, DType::kUndefined);
}

TEST(ShapeInference, BroadcastRules) {
  std::vector<Dim> out;
  ASSERT_TRUE(BroadcastDims({Dim::Symbolic("N"), Dim::Known(1)}, {Dim::Known(5)}, &out));
  EXPECT_EQ(out, (std::vector<Dim>{Dim::Symbolic("N"), Dim::Known(5)}));
  EXPECT_FALSE(BroadcastDims({Dim::Known(3)}, {Dim::Known(4)}, &out));
}

}  // namespace
}  // namespace quantkit::ir
