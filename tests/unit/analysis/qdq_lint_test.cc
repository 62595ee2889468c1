#include "analysis/qdq_lint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "passes/insert_qdq.h"

namespace quantkit::analysis {
namespace {

using ir::Attribute;
using ir::DType;
using ir::Tensor;

// Builds x -Q/DQ-> Conv(W -Q/DQ->) -> y with knobs for each defect.
struct Knobs {
  int64_t opset = 13;
  DType zp_type = DType::kInt8;
  int zp_value = 0;
  float act_scale = 0.1f;
  bool act_per_channel = false;
  bool weight_axis = true;
  bool weight_qdq = true;
  bool omit_zero_point = false;
};

ir::Model Build(const Knobs& k) {
  ir::Model m;
  m.SetOpset("", k.opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(
      DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2), ir::Dim::Known(4), ir::Dim::Known(4)});
  g.AddInput(x);
  auto zp = [&](const std::string& name, std::vector<int64_t> dims) {
    Tensor t(k.zp_type, dims);
    for (int64_t i = 0; i < t.numel(); ++i)
      static_cast<uint8_t*>(t.mutable_data())[i] = static_cast<uint8_t>(k.zp_value);
    return g.AddInitializer(name, std::move(t));
  };
  ir::Value* s =
      k.act_per_channel
          ? g.AddInitializer(
                "x_s", Tensor::FromVector<float>(DType::kFloat, {2}, {k.act_scale, k.act_scale}))
          : g.AddInitializer("x_s", Tensor::FromVector<float>(DType::kFloat, {}, {k.act_scale}));
  ir::Value* z = k.omit_zero_point ? nullptr
                                   : zp("x_z", k.act_per_channel ? std::vector<int64_t>{2}
                                                                 : std::vector<int64_t>{});
  std::vector<ir::Value*> qin{x, s};
  if (z) qin.push_back(z);
  ir::Node* q = g.AddNode("QuantizeLinear", qin, {"x_q"}, "", "x_Q").value();
  std::vector<ir::Value*> dqin{q->output(0), s};
  if (z) dqin.push_back(z);
  ir::Node* dq = g.AddNode("DequantizeLinear", dqin, {"x_dq"}, "", "x_DQ").value();
  if (k.act_per_channel) {
    q->SetAttr(Attribute::Int("axis", 1));
    dq->SetAttr(Attribute::Int("axis", 1));
  }
  ir::Value* w = g.AddInitializer("W", Tensor(DType::kFloat, {3, 2, 1, 1}));
  ir::Value* conv_w = w;
  if (k.weight_qdq) {
    ir::Value* ws =
        g.AddInitializer("W_s", Tensor::FromVector<float>(DType::kFloat, {3}, {0.1f, 0.2f, 0.3f}));
    Tensor wz(DType::kInt8, {3});
    ir::Value* wzv = g.AddInitializer("W_z", std::move(wz));
    ir::Node* wq = g.AddNode("QuantizeLinear", {w, ws, wzv}, {"W_q"}, "", "W_Q").value();
    ir::Node* wdq =
        g.AddNode("DequantizeLinear", {wq->output(0), ws, wzv}, {"W_dq"}, "", "W_DQ").value();
    if (k.weight_axis) {
      wq->SetAttr(Attribute::Int("axis", 0));
      wdq->SetAttr(Attribute::Int("axis", 0));
    }
    conv_w = wdq->output(0);
  }
  ir::Node* conv = g.AddNode("Conv", {dq->output(0), conv_w}, {"y"}, "", "conv").value();
  g.AddOutput(conv->output(0));
  return m;
}

std::set<std::string> Rules(const LintReport& r) {
  std::set<std::string> rules;
  for (const auto& f : r.findings) rules.insert(f.rule);
  return rules;
}

TEST(QdqLint, CleanModelLintsClean) {
  LintReport r = LintQdqModel(Build({}));
  EXPECT_TRUE(r.findings.empty()) << FormatLintText(r);
  EXPECT_EQ(r.num_q, 2);
  EXPECT_EQ(r.num_dq, 2);
}

TEST(QdqLint, EachDefectIsNamed) {
  struct Case {
    Knobs knobs;
    std::string rule;
    Severity severity;
  };
  Knobs nonzero;
  nonzero.zp_value = 3;
  Knobs uint8;
  uint8.zp_type = DType::kUint8;
  Knobs bad_scale;
  bad_scale.act_scale = 0.0f;
  Knobs nan_scale;
  nan_scale.act_scale = std::nanf("");
  Knobs per_channel_act;
  per_channel_act.act_per_channel = true;
  Knobs no_axis;
  no_axis.weight_axis = false;
  Knobs old_opset;
  old_opset.opset = 11;
  Knobs float_weight;
  float_weight.weight_qdq = false;
  Knobs default_zp;
  default_zp.omit_zero_point = true;
  const std::vector<Case> cases{
      {nonzero, "QK001", Severity::kError},         {uint8, "QK002", Severity::kError},
      {bad_scale, "QK003", Severity::kError},       {nan_scale, "QK003", Severity::kError},
      {per_channel_act, "QK005", Severity::kError}, {no_axis, "QK006", Severity::kError},
      {old_opset, "QK007", Severity::kError},       {float_weight, "QK012", Severity::kWarning},
      {default_zp, "QK002", Severity::kError},
  };
  for (const Case& c : cases) {
    LintReport r = LintQdqModel(Build(c.knobs));
    EXPECT_TRUE(Rules(r).count(c.rule)) << c.rule << "\n" << FormatLintText(r);
    EXPECT_EQ(r.Worst(), c.severity) << c.rule;
    for (const auto& f : r.findings) {
      EXPECT_FALSE(f.node.empty());
      EXPECT_FALSE(f.why.empty());
      EXPECT_FALSE(f.fix.empty());
    }
  }
}

TEST(QdqLint, ResidualAddAndConcatScales) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  g.AddInput(x);
  auto qdq = [&](ir::Value* v, float scale, const std::string& tag) {
    ir::Value* s =
        g.AddInitializer(tag + "_s", Tensor::FromVector<float>(DType::kFloat, {}, {scale}));
    ir::Value* z = g.AddInitializer(tag + "_z", Tensor(DType::kInt8, {}));
    ir::Node* q = g.AddNode("QuantizeLinear", {v, s, z}, {tag + "_q"}, "", tag + "_Q").value();
    return g.AddNode("DequantizeLinear", {q->output(0), s, z}, {tag + "_dq"}, "", tag + "_DQ")
        .value()
        ->output(0);
  };
  ir::Node* conv =
      g.AddNode("Conv",
                {qdq(x, 0.1f, "x"), g.AddInitializer("W", Tensor(DType::kFloat, {1, 1, 1, 1}))},
                {"c"}, "", "conv")
          .value();
  ir::Node* add =
      g.AddNode("Add", {qdq(conv->output(0), 0.2f, "c"), qdq(x, 0.3f, "skip")}, {"a"}, "", "add")
          .value();
  ir::Node* cat =
      g.AddNode("Concat", {qdq(add->output(0), 0.4f, "a"), qdq(x, 0.5f, "x2")}, {"o"}, "", "cat")
          .value();
  cat->SetAttr(Attribute::Int("axis", 1));
  ir::Node* sm =
      g.AddNode("Softmax", {qdq(cat->output(0), 0.6f, "o")}, {"y"}, "", "softmax").value();
  g.AddOutput(sm->output(0));
  LintReport r = LintQdqModel(m);
  auto rules = Rules(r);
  EXPECT_TRUE(rules.count("QK009")) << FormatLintText(r);
  EXPECT_TRUE(rules.count("QK010"));
  EXPECT_TRUE(rules.count("QK011"));
  EXPECT_TRUE(rules.count("QK012"));  // the Conv weight is float
  EXPECT_EQ(r.Worst(), Severity::kWarning);
  const std::string json = FormatLintJson(r);
  EXPECT_NE(json.find("\"worst\": \"warning\""), std::string::npos);
}

TEST(QdqLint, QuantkitsOwnOutputLintsClean) {
  // A model quantized by InsertQdq must satisfy its own linter.
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  g.AddInput(x);
  Tensor w(DType::kFloat, {4, 2, 3, 3});
  for (int64_t i = 0; i < w.numel(); ++i)
    w.mutable_data_as<float>()[i] = 0.01f * static_cast<float>(i % 11);
  ir::Node* c1 =
      g.AddNode("Conv", {x, g.AddInitializer("W1", std::move(w))}, {"c1"}, "", "conv1").value();
  ir::Node* r = g.AddNode("Relu", {c1->output(0)}, {"r"}, "", "relu").value();
  ir::Node* gap = g.AddNode("GlobalAveragePool", {r->output(0)}, {"p"}, "", "gap").value();
  g.AddOutput(gap->output(0));
  auto sites = passes::FindQdqSites(g, {});
  ASSERT_TRUE(sites.ok());
  quant::QuantPlan plan;
  for (const auto& t : passes::ActivationTensors(*sites)) plan.SetActivationAmax(t, 3.0f, "max");
  ASSERT_TRUE(passes::AddWeightScales(g, *sites, &plan).ok());
  ASSERT_TRUE(passes::RunPass(m, passes::InsertQdq(plan, *sites)).ok());
  LintReport report = LintQdqModel(m);
  EXPECT_EQ(report.Count(Severity::kError), 0) << FormatLintText(report);
  EXPECT_EQ(report.Count(Severity::kWarning), 0) << FormatLintText(report);
}

}  // namespace
}  // namespace quantkit::analysis

namespace quantkit::analysis {
namespace {

// Issue #48: models onnx.checker rejects linted with 0 errors (QK019), the wrong fix for a chain of
// Casts after a DequantizeLinear (QK017) and no finding for a Cast round trip (QK020).
class TypedLintCases : public ::testing::Test {
 protected:
  // x (dtype, [2, 4]) -> ... built by the caller; opset as given.
  ir::Value* Input(DType dtype, int64_t opset) {
    model_.SetOpset("", opset);
    ir::Value* x = model_.graph->CreateValue("x");
    x->type = ir::TypeInfo::Tensor(dtype, {ir::Dim::Known(2), ir::Dim::Known(4)});
    model_.graph->AddInput(x);
    return x;
  }
  ir::Node* Node(const std::string& op, const std::vector<ir::Value*>& in, const std::string& out) {
    return model_.graph->AddNode(op, in, {out}, "", op + "_" + out).value();
  }
  // QuantizeLinear of `in` with a scale of `scale_type` and an int8 zero point.
  ir::Node* Quantize(ir::Value* in, DType scale_type, const std::string& out) {
    ir::Graph& g = *model_.graph;
    Tensor s(scale_type, {});
    if (scale_type == DType::kFloat) s = Tensor::FromVector<float>(DType::kFloat, {}, {0.1f});
    ir::Value* scale = g.AddInitializer(out + "_s", std::move(s));
    ir::Value* zp = g.AddInitializer(out + "_z", Tensor(DType::kInt8, {}));
    return Node("QuantizeLinear", {in, scale, zp}, out);
  }
  // The findings of `rule`, each "message | fix".
  std::vector<std::string> Findings(const std::string& rule) {
    LintReport r = LintQdqModel(model_);
    std::vector<std::string> out;
    for (const LintFinding& f : r.findings) {
      if (f.rule == rule) out.push_back(f.message + " | " + f.fix);
    }
    return out;
  }
  ir::Model model_;
};

TEST_F(TypedLintCases, CastToAnUnknownTypeOrWithoutTo) {
  ir::Value* x = Input(DType::kFloat, 13);
  ir::Node* bad = Node("Cast", {x}, "a");
  bad->SetAttr(Attribute::Int("to", 999));
  ir::Node* none = Node("Cast", {x}, "b");
  model_.graph->AddOutput(bad->output(0));
  model_.graph->AddOutput(none->output(0));
  const std::vector<std::string> f = Findings("QK019");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NE(f[0].find("Cast to 999"), std::string::npos) << f[0];
  EXPECT_NE(f[1].find("without its required 'to'"), std::string::npos) << f[1];
}

TEST_F(TypedLintCases, QuantizeLinearOfTypesTheOpsetLacks) {
  {
    ir::Value* x = Input(DType::kBFloat16, 13);  // bfloat16 Q/DQ came with opset 19
    model_.graph->AddOutput(Quantize(x, DType::kBFloat16, "q")->output(0));
    const std::vector<std::string> f = Findings("QK019");
    ASSERT_EQ(f.size(), 1u);
    EXPECT_NE(f[0].find("bfloat16"), std::string::npos) << f[0];
    EXPECT_NE(f[0].find("opset 13"), std::string::npos) << f[0];
  }
  model_ = ir::Model();
  {
    ir::Value* x = Input(DType::kBFloat16, 19);  // valid there
    model_.graph->AddOutput(Quantize(x, DType::kBFloat16, "q")->output(0));
    EXPECT_TRUE(Findings("QK019").empty());
  }
  model_ = ir::Model();
  {
    ir::Value* x = Input(DType::kString, 19);
    model_.graph->AddOutput(Quantize(x, DType::kFloat, "q")->output(0));
    EXPECT_EQ(Findings("QK019").size(), 1u);
  }
  model_ = ir::Model();
  {
    ir::Value* x = Input(DType::kFloat, 13);
    ir::Node* q1 = Quantize(x, DType::kFloat, "q1");
    model_.graph->AddOutput(Quantize(q1->output(0), DType::kFloat, "q2")->output(0));
    const std::vector<std::string> f = Findings("QK019");
    ASSERT_EQ(f.size(), 1u);
    EXPECT_NE(f[0].find("a Q of a Q"), std::string::npos) << f[0];
  }
}

TEST_F(TypedLintCases, CastChainAfterDequantizeAndRoundTrips) {
  ir::Value* x = Input(DType::kFloat, 19);
  ir::Node* q = Quantize(x, DType::kFloat, "q");
  ir::Node* dq = Node("DequantizeLinear", {q->output(0), q->input(1), q->input(2)}, "dq");
  ir::Node* to32 = Node("Cast", {dq->output(0)}, "c32");
  to32->SetAttr(Attribute::Int("to", static_cast<int64_t>(DType::kFloat)));
  ir::Node* to16 = Node("Cast", {to32->output(0)}, "c16");
  to16->SetAttr(Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)));
  ir::Value* w = model_.graph->AddInitializer("w", Tensor(DType::kFloat16, {4, 3}));
  model_.graph->AddOutput(Node("MatMul", {to16->output(0), w}, "y")->output(0));
  // x -> Cast(fp16) -> Cast(fp32) -> graph output.
  ir::Node* down = Node("Cast", {x}, "down");
  down->SetAttr(Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)));
  ir::Node* up = Node("Cast", {down->output(0)}, "up");
  up->SetAttr(Attribute::Int("to", static_cast<int64_t>(DType::kFloat)));
  model_.graph->AddOutput(up->output(0));

  const std::vector<std::string> chain = Findings("QK017");
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_NE(chain[0].find("scale as float16"), std::string::npos) << chain[0];
  EXPECT_NE(chain[0].find("the 2 Casts"), std::string::npos) << chain[0];
  const std::vector<std::string> trips = Findings("QK020");
  ASSERT_EQ(trips.size(), 1u);
  EXPECT_NE(trips[0].find("graph output 'up'"), std::string::npos) << trips[0];
}

}  // namespace
}  // namespace quantkit::analysis
