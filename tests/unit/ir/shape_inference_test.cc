// Shape inference checked against the ONNX node tests (each declares its outputs' types, which
// are hidden before inference and compared after), plus hand-written cases for symbolic dims.
#include "ir/shape_inference.h"

#include <gtest/gtest.h>
#include <dirent.h>
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
  std::printf("node tests: %d node outputs, %d shapes inferred, %d mismatches\n", outputs,
              shaped, mismatches);
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
  x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Symbolic("N"), Dim::Known(3), Dim::Known(32),
                                             Dim::Known(32)});
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
  Node* q = g.AddNode("QuantizeLinear", {add->output(0), g.AddInitializer("s", Tensor(DType::kFloat, {})),
                                         g.AddInitializer("zp", Tensor(DType::kInt8, {}))},
                      {"q"}).value();
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

// The rule table is keyed as the kernel table is: per (domain, op_type), disjoint opset ranges.
TEST(ShapeInference, RuleRangesDoNotOverlap) {
  const std::vector<ShapeRuleKey> rules = ShapeRules();
  ASSERT_GT(rules.size(), 100u);
  for (size_t i = 0; i < rules.size(); ++i) {
    EXPECT_LE(rules[i].since, rules[i].until) << rules[i].op_type;
    if (i > 0 && rules[i].domain == rules[i - 1].domain && rules[i].op_type == rules[i - 1].op_type) {
      EXPECT_GT(rules[i].since, rules[i - 1].until) << rules[i].domain << "::" << rules[i].op_type;
    }
  }
  auto has = [&rules](const std::string& domain, const std::string& op, int64_t since) {
    return std::any_of(rules.begin(), rules.end(), [&](const ShapeRuleKey& k) {
      return k.domain == domain && k.op_type == op && k.since == since;
    });
  };
  EXPECT_TRUE(has("", "Squeeze", 1) && has("", "Squeeze", 13));  // axes: attribute, then input
  EXPECT_TRUE(has("", "Slice", 1) && has("", "Slice", 10));
  EXPECT_TRUE(has("com.quantkit", "FakeQuantizeLinear", 1));
}

// A node gets the rule of its domain at the opset its model imports for that domain: quantkit's
// FakeQuantizeLinear is typed when com.quantkit is imported and left untyped (as any unknown op)
// when it is not; Squeeze reads its axes from the input at 13 and from the attribute before.
TEST(ShapeInference, RulesAreKeyedByDomainAndOpset) {
  for (const bool imported : {true, false}) {
    Model m;
    m.SetOpset("", 17);
    if (imported) m.SetOpset("com.quantkit", 1);
    Graph& g = *m.graph;
    Value* x = g.CreateValue("x");
    x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Symbolic("N"), Dim::Known(3)});
    g.AddInput(x);
    Node* fq = g.AddNode("FakeQuantizeLinear", {x}, {"q"}, "com.quantkit").value();
    ASSERT_TRUE(InferShapes(m).ok());
    if (imported) {
      EXPECT_EQ(fq->output(0)->type.ToString(), "float[N,3]");
    } else {
      EXPECT_EQ(fq->output(0)->type.kind, TypeInfo::Kind::kNone);
    }
  }
  for (const int64_t opset : {11, 13}) {
    Model m;
    m.SetOpset("", opset);
    Graph& g = *m.graph;
    Value* x = g.CreateValue("x");
    x->type = TypeInfo::Tensor(DType::kFloat, {Dim::Known(2), Dim::Known(1), Dim::Known(5)});
    g.AddInput(x);
    std::vector<Value*> inputs = {x};
    if (opset >= 13) {
      inputs.push_back(g.AddInitializer("axes", Tensor::FromVector<int64_t>(DType::kInt64, {1}, {1})));
    }
    Node* sq = g.AddNode("Squeeze", inputs, {"y"}).value();
    if (opset < 13) sq->SetAttr(Attribute::Ints("axes", {1}));
    ASSERT_TRUE(InferShapes(m).ok());
    EXPECT_EQ(sq->output(0)->type.ToString(), "float[2,5]") << "opset " << opset;
  }
}

TEST(ShapeInference, BroadcastRules) {
  std::vector<Dim> out;
  ASSERT_TRUE(BroadcastDims({Dim::Symbolic("N"), Dim::Known(1)}, {Dim::Known(5)}, &out));
  EXPECT_EQ(out, (std::vector<Dim>{Dim::Symbolic("N"), Dim::Known(5)}));
  EXPECT_FALSE(BroadcastDims({Dim::Known(3)}, {Dim::Known(4)}, &out));
}

}  // namespace
}  // namespace quantkit::ir
