// Lint rules for strongly typed networks (analysis/typed_lint.h, QK015-QK018): each rule has a
// model that trips it and the fixed model that does not, built in the IR with float16 tensors.
#include "analysis/typed_lint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/float16.h"

namespace quantkit::analysis {
namespace {

using ir::Attribute;
using ir::DType;
using ir::Tensor;

Tensor Scalar(DType dtype, float v) {
  Tensor t(dtype, {});
  if (dtype == DType::kFloat) {
    *t.mutable_data_as<float>() = v;
  } else {
    *t.mutable_data_as<uint16_t>() = ir::FloatToHalf(v);
  }
  return t;
}

struct Graph {
  ir::Model m;
  ir::Graph& g;
  Graph() : g(*m.graph) { m.SetOpset("", 19); }
  ir::Value* Input(const std::string& name, DType dtype) {
    ir::Value* v = g.CreateValue(name);
    v->type = ir::TypeInfo::Tensor(dtype, {ir::Dim::Known(1), ir::Dim::Known(4)});
    g.AddInput(v);
    return v;
  }
  ir::Node* Node(const std::string& op, std::vector<ir::Value*> in, const std::string& out) {
    return g.AddNode(op, in, {out}, "", op + "_" + out).value();
  }
  ir::Node* Cast(ir::Value* in, DType to, const std::string& out) {
    ir::Node* n = Node("Cast", {in}, out);
    n->SetAttr(Attribute::Int("to", static_cast<int64_t>(to)));
    return n;
  }
  std::vector<LintFinding> Lint() {
    std::vector<LintFinding> f;
    LintStronglyTyped(m, &f);
    return f;
  }
};

std::vector<std::string> Rules(const std::vector<LintFinding>& findings) {
  std::vector<std::string> r;
  for (const LintFinding& f : findings) r.push_back(f.rule + ":" + f.node);
  return r;
}

TEST(TypedLint, QK015MixedFloatTypesAtAnOp) {
  for (DType c_type : {DType::kFloat, DType::kFloat16}) {
    Graph t;
    ir::Value* x = t.Input("x", DType::kFloat16);
    ir::Value* c = t.g.AddInitializer("c", Scalar(c_type, 1.5f));
    t.g.AddOutput(t.Node("Add", {x, c}, "y")->output(0));
    const std::vector<LintFinding> f = t.Lint();
    if (c_type == DType::kFloat) {
      ASSERT_EQ(Rules(f), std::vector<std::string>{"QK015:Add_y"});
      EXPECT_EQ(f[0].severity, Severity::kError);
      EXPECT_NE(f[0].message.find("'c' (float)"), std::string::npos) << f[0].message;
      EXPECT_NE(f[0].fix.find("Cast 'c' to float16"), std::string::npos) << f[0].fix;
    } else {
      EXPECT_TRUE(f.empty()) << Rules(f).front();
    }
  }
}

// x (float16) -Q(s)-> -DQ(s_dq)-> MatMul(., W float16)
Graph QdqModel(DType q_scale, DType dq_scale) {
  Graph t;
  ir::Value* x = t.Input("x", DType::kFloat16);
  ir::Value* z = t.g.AddInitializer("z", Tensor(DType::kInt8, {}));
  ir::Value* s = t.g.AddInitializer("s", Scalar(q_scale, 0.5f));
  ir::Value* s2 = dq_scale == q_scale ? s : t.g.AddInitializer("s2", Scalar(dq_scale, 0.5f));
  ir::Node* q = t.Node("QuantizeLinear", {x, s, z}, "xq");
  ir::Node* dq = t.Node("DequantizeLinear", {q->output(0), s2, z}, "xdq");
  t.g.AddOutput(dq->output(0));
  return t;
}

TEST(TypedLint, QK016QuantizeScaleTypeAndPairsThatChangeTheType) {
  std::vector<LintFinding> f = QdqModel(DType::kFloat, DType::kFloat).Lint();
  ASSERT_EQ(Rules(f), (std::vector<std::string>{"QK016:QuantizeLinear_xq", "QK016:DequantizeLinear_xdq"}));
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_NE(f[0].fix.find("store the scale as float16"), std::string::npos) << f[0].fix;
  EXPECT_EQ(f[1].severity, Severity::kWarning);
  f = QdqModel(DType::kFloat16, DType::kFloat).Lint();
  ASSERT_EQ(Rules(f), std::vector<std::string>{"QK016:DequantizeLinear_xdq"});
  EXPECT_NE(f[0].message.find("to float"), std::string::npos) << f[0].message;
  EXPECT_TRUE(QdqModel(DType::kFloat16, DType::kFloat16).Lint().empty());
}

// INT8 weight -DQ(scale)-> [Cast to float16] -> MatMul(x float16, .)
Graph WeightModel(DType scale, bool cast) {
  Graph t;
  ir::Value* x = t.Input("x", DType::kFloat16);
  ir::Value* w = t.g.AddInitializer("w", Tensor(DType::kInt8, {4, 2}));
  ir::Value* s = t.g.AddInitializer("ws", Scalar(scale, 0.25f));
  ir::Value* z = t.g.AddInitializer("z", Tensor(DType::kInt8, {}));
  ir::Value* wf = t.Node("DequantizeLinear", {w, s, z}, "wdq")->output(0);
  if (cast) wf = t.Cast(wf, DType::kFloat16, "w16")->output(0);
  t.g.AddOutput(t.Node("MatMul", {x, wf}, "y")->output(0));
  return t;
}

TEST(TypedLint, QK017CastBetweenDequantizeAndItsConsumer) {
  std::vector<LintFinding> f = WeightModel(DType::kFloat, /*cast=*/true).Lint();
  ASSERT_EQ(Rules(f), std::vector<std::string>{"QK017:Cast_w16"});
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_NE(f[0].message.find("MatMul 'MatMul_y'"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].fix.find("scale as float16"), std::string::npos) << f[0].fix;
  // The fix: the DequantizeLinear outputs float16 itself.
  EXPECT_TRUE(WeightModel(DType::kFloat16, /*cast=*/false).Lint().empty());
}

// x (float16) -> Cast(float) -> Softmax [-> Cast(float16) -> Relu] -> output
Graph IslandModel(bool back_to_16) {
  Graph t;
  ir::Value* x = t.Input("x", DType::kFloat16);
  ir::Value* up = t.Cast(x, DType::kFloat, "x32")->output(0);
  ir::Value* sm = t.Node("Softmax", {up}, "sm")->output(0);
  if (!back_to_16) {
    t.g.AddOutput(sm);
    return t;
  }
  ir::Value* down = t.Cast(sm, DType::kFloat16, "sm16")->output(0);
  t.g.AddOutput(t.Node("Relu", {down}, "y")->output(0));
  return t;
}

TEST(TypedLint, QK018Fp32IslandBetweenSixteenBitRegions) {
  std::vector<LintFinding> f = IslandModel(/*back_to_16=*/true).Lint();
  ASSERT_EQ(Rules(f), std::vector<std::string>{"QK018:Softmax_sm"});
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  EXPECT_NE(f[0].message.find("1 node run in FP32"), std::string::npos) << f[0].message;
  // A float32 region that is the model's output is not an island.
  EXPECT_TRUE(IslandModel(/*back_to_16=*/false).Lint().empty());
}

}  // namespace
}  // namespace quantkit::analysis
