#include <gtest/gtest.h>

#include "ir/verifier.h"
#include "passes/extract_qdq.h"
#include "passes/qdq_pairs.h"
#include "passes/strip_qdq.h"

namespace quantkit::passes {
namespace {

using ir::Attribute;
using ir::DType;
using ir::Tensor;

ir::Value* Scalar(ir::Graph& g, const std::string& name, float v) {
  return g.AddInitializer(name, Tensor::FromVector<float>(DType::kFloat, {}, {v}));
}
ir::Value* Zp(ir::Graph& g, const std::string& name, DType dtype, std::vector<int64_t> dims,
              int v) {
  Tensor t(dtype, dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kInt8) {
      t.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(v);
    } else {
      t.mutable_data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
  }
  return g.AddInitializer(name, std::move(t));
}

// Appends x -Q-> -DQ-> and returns the DQ output.
ir::Value* FakeQuant(ir::Graph& g, ir::Value* x, ir::Value* s, ir::Value* z, const std::string& tag,
                     int64_t axis = -1) {
  ir::Node* q = g.AddNode("QuantizeLinear", {x, s, z}, {tag + "_q"}, "", tag + "_Q").value();
  ir::Node* dq =
      g.AddNode("DequantizeLinear", {q->output(0), s, z}, {tag + "_dq"}, "", tag + "_DQ").value();
  if (axis >= 0) {
    q->SetAttr(Attribute::Int("axis", axis));
    dq->SetAttr(Attribute::Int("axis", axis));
  }
  return dq->output(0);
}

// A QAT-style export:
//   x -QDQ(0.02)-> Conv(W -QDQ per-channel->) = c -> Relu = r -QDQ(0.05)-> MaxPool = m -> Flatten =
//   f f -QDQ(0.1, uint8 zp 128)-> Gemm(DQ(Wq int8 per-channel), transB) = logits -QDQ(0.2)-> (graph
//   output "out")
struct QatNet {
  ir::Model model;
  QatNet() {
    model.SetOpset("", 13);
    ir::Graph& g = *model.graph;
    ir::Value* x = g.CreateValue("x");
    g.AddInput(x);
    ir::Value* xq =
        FakeQuant(g, x, Scalar(g, "x_s", 0.02f), Zp(g, "x_z", DType::kInt8, {}, 0), "x");
    Tensor w(DType::kFloat, {2, 1, 1, 1});
    w.mutable_data_as<float>()[0] = 0.5f;
    w.mutable_data_as<float>()[1] = -1.0f;
    ir::Value* W = g.AddInitializer("W", std::move(w));
    ir::Value* ws = g.AddInitializer(
        "W_s", Tensor::FromVector<float>(DType::kFloat, {2}, {0.5f / 127, 1.0f / 127}));
    ir::Value* wq = FakeQuant(g, W, ws, Zp(g, "W_z", DType::kInt8, {2}, 0), "W", 0);
    ir::Node* conv = g.AddNode("Conv", {xq, wq}, {"c"}, "", "conv").value();
    ir::Node* relu = g.AddNode("Relu", {conv->output(0)}, {"r"}, "", "relu").value();
    ir::Value* rq = FakeQuant(g, relu->output(0), Scalar(g, "r_s", 0.05f),
                              Zp(g, "r_z", DType::kInt8, {}, 0), "r");
    ir::Node* pool = g.AddNode("MaxPool", {rq}, {"m"}, "", "pool").value();
    ir::Node* flat = g.AddNode("Flatten", {pool->output(0)}, {"f"}, "", "flatten").value();
    ir::Value* fq = FakeQuant(g, flat->output(0), Scalar(g, "f_s", 0.1f),
                              Zp(g, "f_z", DType::kUint8, {}, 128), "f");
    ir::Value* Wq = g.AddInitializer(
        "Wfc_q", Tensor::FromVector<int8_t>(DType::kInt8, {3, 2}, {1, -2, 3, -4, 127, -127}));
    ir::Value* fcs = g.AddInitializer(
        "Wfc_s", Tensor::FromVector<float>(DType::kFloat, {3}, {0.1f, 0.2f, 0.3f}));
    ir::Node* wdq = g.AddNode("DequantizeLinear", {Wq, fcs, Zp(g, "Wfc_z", DType::kInt8, {3}, 0)},
                              {"Wfc"}, "", "Wfc_DQ")
                        .value();
    wdq->SetAttr(Attribute::Int("axis", 0));
    ir::Node* gemm = g.AddNode("Gemm", {fq, wdq->output(0)}, {"logits"}, "", "fc").value();
    gemm->SetAttr(Attribute::Int("transB", 1));
    ir::Node* q =
        g.AddNode("QuantizeLinear",
                  {gemm->output(0), Scalar(g, "o_s", 0.2f), Zp(g, "o_z", DType::kInt8, {}, 0)},
                  {"o_q"}, "", "o_Q")
            .value();
    ir::Node* dq =
        g.AddNode("DequantizeLinear", {q->output(0), g.FindValue("o_s"), g.FindValue("o_z")},
                  {"out"}, "", "o_DQ")
            .value();
    dq->output(0)->type =
        ir::TypeInfo::Tensor(DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Known(3)});
    g.AddOutput(dq->output(0));
    EXPECT_TRUE(ir::Verify(model).ok()) << ir::Verify(model).ToString();
  }
};

TEST(QdqUnits, RecognisesPairsAndStoredWeights) {
  QatNet net;
  auto units = FindQdqUnits(*net.model.graph);
  ASSERT_EQ(units.size(), 6u);
  int dq_only = 0;
  for (const QdqUnit& u : units) {
    EXPECT_TRUE(u.constant_params);
    dq_only += u.q ? 0 : 1;
    if (u.x->name() == "W") {
      EXPECT_TRUE(u.weight);
      EXPECT_EQ(u.axis, 0);
      EXPECT_TRUE(u.per_channel());
    }
    if (u.x->name() == "f") {
      EXPECT_FALSE(u.symmetric());
    }
  }
  EXPECT_EQ(dq_only, 1);
}

TEST(ExtractQdq, MapsScalesOntoFloatTensorsAndPropagates) {
  QatNet net;
  ExtractReport report;
  auto plan = ExtractQdqPlan(*net.model.graph, {}, &report);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(report.activations, 4);  // x, r, f, logits
  EXPECT_EQ(report.weights, 2);      // W, Wfc
  EXPECT_EQ(plan->Find("x")->scale, std::vector<float>{0.02f});
  EXPECT_EQ(plan->Find("r")->scale, std::vector<float>{0.05f});
  EXPECT_EQ(plan->Find("W")->axis, 0);
  EXPECT_EQ(plan->Find("W")->role, quant::TensorRole::kWeight);
  EXPECT_EQ(plan->Find("Wfc")->scale, (std::vector<float>{0.1f, 0.2f, 0.3f}));
  // Propagation: conv output c takes the Relu output's scale (Conv+Relu fuse), m = MaxPool(r).
  ASSERT_NE(plan->Find("c"), nullptr);
  EXPECT_EQ(plan->Find("c")->scale, std::vector<float>{0.05f});
  EXPECT_NE(plan->Find("c")->source.find("Relu"), std::string::npos);
  ASSERT_NE(plan->Find("m"), nullptr);
  EXPECT_EQ(plan->Find("m")->scale, std::vector<float>{0.05f});
  // f has its own (asymmetric) scale: converted to symmetric over [-12.8, 12.7].
  EXPECT_FLOAT_EQ(plan->Find("f")->scale[0], 12.8f / 127.0f);
  EXPECT_NE(plan->Find("f")->reason.find("zero point 128"), std::string::npos);
  EXPECT_EQ(report.converted_asymmetric, 1);
  EXPECT_TRUE(quant::ValidatePlan(*plan).ok());
}

TEST(ExtractQdq, WithoutPropagationOnlyDirectScales) {
  QatNet net;
  ExtractReport report;
  auto plan = ExtractQdqPlan(*net.model.graph, ExtractOptions{/*propagate=*/false}, &report);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->Find("c"), nullptr);
  EXPECT_EQ(report.propagated, 0);
}

TEST(StripQdq, LeavesTheEquivalentFloatModel) {
  QatNet net;
  auto report = RunPass(net.model, StripQdq());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(counter::kPairsRemoved), 5);
  EXPECT_EQ(report->Count(counter::kWeightsDequantized), 1);
  EXPECT_EQ(report->Count(counter::kLeftInPlace), 0);
  const ir::Graph& g = *net.model.graph;
  for (const ir::Node* n : g.nodes()) {
    EXPECT_NE(n->op_type(), "QuantizeLinear");
    EXPECT_NE(n->op_type(), "DequantizeLinear");
    if (n->op_type() == "Conv") {
      EXPECT_EQ(n->input(0)->name(), "x");
      EXPECT_EQ(n->input(1)->name(), "W");  // original float weights kept
    }
    if (n->op_type() == "Gemm") {
      EXPECT_EQ(n->input(0)->name(), "f");
      const ir::Value* w = n->input(1);
      EXPECT_EQ(w->name(), "Wfc");
      ASSERT_TRUE(w->initializer.has_value());
      const float* d = w->initializer->data_as<float>();
      EXPECT_FLOAT_EQ(d[0], 0.1f);    // 1 * 0.1 (row 0)
      EXPECT_FLOAT_EQ(d[3], -0.8f);   // -4 * 0.2 (row 1)
      EXPECT_FLOAT_EQ(d[5], -38.1f);  // -127 * 0.3 (row 2)
    }
  }
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0]->name(), "out");  // output name kept through an Identity
  EXPECT_EQ(g.outputs()[0]->producer()->op_type(), "Identity");
  EXPECT_EQ(g.outputs()[0]->type.ToString(), "float[N,3]");  // declared type kept
  EXPECT_EQ(g.FindValue("x_s"), nullptr);                    // scale initializers removed
  EXPECT_EQ(g.FindValue("Wfc_q"), nullptr);
  EXPECT_TRUE(ir::Verify(net.model).ok());
}

TEST(StripQdq, ExtractAfterStripFindsNothing) {
  QatNet net;
  ASSERT_TRUE(RunPass(net.model, StripQdq()).ok());
  auto plan = ExtractQdqPlan(*net.model.graph, {}, nullptr);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->tensors.empty());
}

}  // namespace
}  // namespace quantkit::passes
