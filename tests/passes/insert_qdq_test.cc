#include "passes/insert_qdq.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/verifier.h"
#include "quant/weight_scales.h"

namespace quantkit::passes {
namespace {

using ir::Attribute;
using ir::Dim;
using ir::DType;
using ir::Tensor;
using ir::TypeInfo;

ir::Value* Weight(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, float base) {
  Tensor t(DType::kFloat, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data_as<float>()[i] = base * static_cast<float>((i % 7) - 3);
  return g.AddInitializer(name, std::move(t));
}

// x -> Conv1 -> Relu = a ; a -> Conv2 = b ; Add(b, a) = c ; GAP(c) = d ; Flatten = e ;
// Gemm(e, fc.w^T) = logits ; Softmax(logits) = y
struct ResidualNet {
  ir::Model model;
  ir::Node* conv2 = nullptr;
  ir::Node* add = nullptr;
  ir::Node* gemm = nullptr;

  ResidualNet() {
    model.SetOpset("", 13);
    ir::Graph& g = *model.graph;
    ir::Value* x = g.CreateValue("x");
    x->type = TypeInfo::Tensor(DType::kFloat,
                               {Dim::Symbolic("N"), Dim::Known(3), Dim::Known(8), Dim::Known(8)});
    g.AddInput(x);
    ir::Node* conv1 =
        g.AddNode("Conv", {x, Weight(g, "w1", {4, 3, 3, 3}, 0.1f)}, {"c1"}, "", "conv1").value();
    ir::Node* relu = g.AddNode("Relu", {conv1->output(0)}, {"a"}, "", "relu").value();
    conv2 = g.AddNode("Conv", {relu->output(0), Weight(g, "w2", {4, 4, 3, 3}, 0.2f)}, {"b"}, "",
                      "conv2")
                .value();
    add = g.AddNode("Add", {conv2->output(0), relu->output(0)}, {"c"}, "", "add").value();
    ir::Node* gap = g.AddNode("GlobalAveragePool", {add->output(0)}, {"d"}, "", "gap").value();
    ir::Node* flat = g.AddNode("Flatten", {gap->output(0)}, {"e"}, "", "flatten").value();
    gemm = g.AddNode(
                "Gemm",
                {flat->output(0), Weight(g, "fc.w", {10, 4}, 0.3f), Weight(g, "fc.b", {10}, 0.0f)},
                {"logits"}, "", "fc")
               .value();
    gemm->SetAttr(Attribute::Int("transB", 1));
    ir::Node* sm = g.AddNode("Softmax", {gemm->output(0)}, {"y"}, "", "softmax").value();
    g.AddOutput(sm->output(0));
  }

  quant::QuantPlan Plan(const std::vector<QdqSite>& sites) {
    quant::QuantPlan plan;
    for (const std::string& t : ActivationTensors(sites)) plan.SetActivationAmax(t, 4.0f, "max");
    EXPECT_TRUE(AddWeightScales(*model.graph, sites, &plan).ok());
    return plan;
  }
};

int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op ? 1 : 0;
  return n;
}

TEST(QdqPlacement, FollowsTensorRtRecipe) {
  ResidualNet net;
  auto sites = FindQdqSites(*net.model.graph, {});
  ASSERT_TRUE(sites.ok()) << sites.status().ToString();
  // x, w1 (conv1); a, w2 (conv2); a (residual skip of add); c (GAP); e, fc.w (Gemm).
  ASSERT_EQ(sites->size(), 8u);
  EXPECT_EQ(ActivationTensors(*sites), (std::vector<std::string>{"a", "c", "e", "x"}));
  for (const QdqSite& s : *sites) {
    if (s.tensor == "w1" || s.tensor == "w2") {
      EXPECT_EQ(s.axis, 0);
    }
    if (s.tensor == "fc.w") {
      EXPECT_EQ(s.axis, 0);  // transB = 1
    }
    if (s.consumer == net.add) {
      EXPECT_EQ(s.input_index, 1) << "the skip branch, not the conv output";
    }
    EXPECT_NE(s.tensor, "fc.b") << "biases stay float";
    EXPECT_NE(s.tensor, "logits") << "Softmax stays float";
  }
}

TEST(QdqPlacement, ExclusionsAndLaterConvIsBackbone) {
  ResidualNet net;
  PlacementOptions options;
  options.exclude_nodes = {"conv1"};
  options.exclude_op_types = {"Gemm"};
  auto sites = FindQdqSites(*net.model.graph, options);
  ASSERT_TRUE(sites.ok());
  for (const QdqSite& s : *sites) {
    EXPECT_NE(s.consumer->name, "conv1");
    EXPECT_NE(s.consumer->name, "fc");
  }
  // Both Add inputs from Convs (a downsample shortcut): the earlier conv is the skip branch.
  ir::Graph& g = *net.model.graph;
  ir::Node* shortcut =
      g.InsertNodeBefore(net.conv2, "Conv", {g.FindValue("x"), Weight(g, "ws", {4, 3, 1, 1}, 0.1f)},
                         {"s"}, "", "shortcut")
          .value();
  g.SetNodeInput(net.add, 1, shortcut->output(0));
  auto sites2 = FindQdqSites(g, {});
  ASSERT_TRUE(sites2.ok());
  bool found = false;
  for (const QdqSite& s : *sites2) {
    if (s.consumer == net.add) {
      EXPECT_EQ(s.tensor, "s");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// Issue #13 item 10: torchvision exports the projection shortcut AFTER the main branch, so
// "the later Conv is the backbone" quantized the main branch's Conv output (lint QK009: it blocks
// the Conv+Add fusion). The backbone is the deeper Conv, wherever the exporter put it.
TEST(QdqPlacement, ProjectionShortcutExportedLastIsStillTheSkipBranch) {
  ResidualNet net;
  ir::Graph& g = *net.model.graph;
  ir::Node* shortcut =
      g.InsertNodeBefore(net.add, "Conv", {g.FindValue("x"), Weight(g, "ws", {4, 3, 1, 1}, 0.1f)},
                         {"s"}, "", "downsample")
          .value();
  g.SetNodeInput(net.add, 1, shortcut->output(0));
  auto sites = FindQdqSites(g, {});
  ASSERT_TRUE(sites.ok());
  int add_sites = 0;
  for (const QdqSite& s : *sites) {
    if (s.consumer != net.add) continue;
    ++add_sites;
    EXPECT_EQ(s.tensor, "s")
        << "the shortcut Conv's output is quantized, the backbone (conv2) stays float";
  }
  EXPECT_EQ(add_sites, 1);
}

// Issue #13 item 6: an exclusion that matches nothing is an error listing close names.
TEST(QdqPlacement, ExclusionsMatchingNothingAreErrors) {
  ResidualNet net;
  PlacementOptions options;
  options.exclude_nodes = {"Softmx"};
  options.exclude_op_types = {"Softmx"};
  auto sites = FindQdqSites(*net.model.graph, options);
  ASSERT_FALSE(sites.ok());
  EXPECT_EQ(sites.status().code(), StatusCode::kNotFound);
  EXPECT_NE(sites.status().message().find("did you mean 'Softmax'"), std::string::npos)
      << sites.status().message();
  options.exclude_nodes = {"conv9"};
  options.exclude_op_types.clear();
  EXPECT_FALSE(FindQdqSites(*net.model.graph, options).ok());
}

TEST(InsertQdq, InsertsSharedPairsWithExplicitAxis) {
  ResidualNet net;
  auto sites = FindQdqSites(*net.model.graph, {});
  ASSERT_TRUE(sites.ok());
  quant::QuantPlan plan = net.Plan(*sites);
  auto report = RunPass(net.model, InsertQdq(plan, *sites, WeightStorage::kFakeQuant));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(passes::counter::kActivationPairs), 4);
  EXPECT_EQ(report->Count(passes::counter::kWeightPairs), 3);
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(CountOps(g, "QuantizeLinear"), 7);
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 7);
  // 'a' feeds conv2 and the residual Add through ONE shared pair.
  const ir::Value* a = g.FindValue("a");
  ASSERT_EQ(a->uses().size(), 1u);
  const ir::Node* q = a->uses()[0].node;
  EXPECT_EQ(q->op_type(), "QuantizeLinear");
  const ir::Value* dq_out = q->output(0)->uses()[0].node->output(0);
  EXPECT_EQ(dq_out->uses().size(), 2u);
  // The conv output feeding the Add stays float (Conv + Add fusion).
  EXPECT_EQ(net.add->input(0)->name(), "b");
  // Weights: per-channel, axis written explicitly, scale = max|w|/127 per channel.
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() != "QuantizeLinear" || n->input(0)->name() != "w1") continue;
    EXPECT_TRUE(n->has_attr("axis"));
    EXPECT_EQ(n->GetInt("axis", -9), 0);
    const ir::Tensor& s = *n->input(1)->initializer;
    ASSERT_EQ(s.numel(), 4);
    EXPECT_FLOAT_EQ(s.data_as<float>()[0], 0.3f / 127.0f);
    EXPECT_EQ(n->input(2)->initializer->dtype(), DType::kInt8);
  }
  EXPECT_TRUE(ir::Verify(net.model).ok());
  // Graph output untouched.
  EXPECT_EQ(g.outputs()[0]->name(), "y");
}

// The default storage: int8 initializers behind a DequantizeLinear that takes the weight's name,
// holding exactly what QuantizeLinear of the float weight gives; the float weights are gone.
TEST(InsertQdq, StoresWeightsAsInt8UnderTheirOwnNames) {
  ResidualNet net;
  auto sites = FindQdqSites(*net.model.graph, {});
  ASSERT_TRUE(sites.ok());
  const ir::Tensor w1 = *net.model.graph->FindValue("w1")->initializer;
  quant::QuantPlan plan = net.Plan(*sites);
  auto report = RunPass(net.model, InsertQdq(plan, *sites, WeightStorage::kInt8));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->Count(passes::counter::kWeightPairs), 3);
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(CountOps(g, "QuantizeLinear"), 4);    // activations only
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 7);  // 4 activations + 3 weights
  for (const char* name : {"w1", "w2", "fc.w"}) {
    const ir::Value* w = g.FindValue(name);
    ASSERT_NE(w, nullptr) << name;
    ASSERT_NE(w->producer(), nullptr) << name << " should be the DequantizeLinear's output";
    EXPECT_EQ(w->producer()->op_type(), "DequantizeLinear");
    const ir::Value* stored = w->producer()->input(0);
    ASSERT_TRUE(stored->is_constant());
    EXPECT_EQ(stored->initializer->dtype(), DType::kInt8);
    EXPECT_TRUE(w->producer()->has_attr("axis"));
  }
  // w1's int8 values are QuantizeLinear's: round(w / scale) per output channel, saturated.
  const ir::Node* dq = g.FindValue("w1")->producer();
  const ir::Tensor& q = *dq->input(0)->initializer;
  const ir::Tensor& s = *dq->input(1)->initializer;
  const int64_t per_channel = w1.numel() / 4;
  for (int64_t i = 0; i < w1.numel(); ++i) {
    const float scale = s.data_as<float>()[i / per_channel];
    EXPECT_EQ(q.data_as<int8_t>()[i],
              static_cast<int8_t>(std::nearbyint(w1.data_as<float>()[i] / scale)))
        << i;
  }
  EXPECT_TRUE(ir::Verify(net.model).ok());
}

TEST(InsertQdq, RefusesOldOpsetWithoutChangingTheGraph) {
  ResidualNet net;
  net.model.SetOpset("", 11);
  auto sites = FindQdqSites(*net.model.graph, {});
  ASSERT_TRUE(sites.ok());
  quant::QuantPlan plan = net.Plan(*sites);
  const size_t before = net.model.graph->num_nodes();
  auto report = RunPass(net.model, InsertQdq(plan, *sites));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(report.status().message().find("opset 11"), std::string::npos);
  EXPECT_EQ(net.model.graph->num_nodes(), before);
}

TEST(InsertQdq, DegenerateRangesStayFloatWithReason) {
  ResidualNet net;
  auto sites = FindQdqSites(*net.model.graph, {});
  ASSERT_TRUE(sites.ok());
  quant::QuantPlan plan = net.Plan(*sites);
  plan.SetActivationAmax("c", 0.0f, "max");  // a tensor that never varies
  auto report = RunPass(net.model, InsertQdq(plan, *sites));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->Count(passes::counter::kActivationPairs), 3);
  ASSERT_EQ(report->List(passes::list::kSkipped).size(), 1u);
  EXPECT_NE(report->List(passes::list::kSkipped)[0].find("c: calibrated amax 0"),
            std::string::npos);
  for (const ir::Node* n : net.model.graph->nodes()) {
    if (n->op_type() == "GlobalAveragePool") {
      EXPECT_EQ(n->input(0)->name(), "c");
    }
  }
}

TEST(WeightScales, PerChannelAnyAxisAndZeroChannels) {
  // dims [2, 3]: rows are channels on axis 0, columns on axis 1.
  const std::vector<float> w = {1, -4, 2, 0, 0, 0};
  auto rows = quant::PerChannelAbsMax(w.data(), {2, 3}, 0, "w");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, (std::vector<float>{4, 0}));
  auto cols = quant::PerChannelAbsMax(w.data(), {2, 3}, 1, "w");
  EXPECT_EQ(*cols, (std::vector<float>{1, 4, 2}));
  auto all = quant::PerChannelAbsMax(w.data(), {2, 3}, -1, "w");
  EXPECT_EQ(*all, (std::vector<float>{4}));
  const auto scales = quant::WeightScalesFromAmax(*rows);
  EXPECT_FLOAT_EQ(scales[0], 4.0f / 127.0f);
  EXPECT_EQ(scales[1], quant::kZeroChannelScale);  // never a zero scale
  const std::vector<float> bad = {1, std::nanf("")};
  auto nan = quant::PerChannelAbsMax(bad.data(), {2}, 0, "conv.w");
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("conv.w"), std::string::npos);
  EXPECT_FALSE(quant::PerChannelAbsMax(w.data(), {2, 3}, 2, "w").ok());
}

TEST(QdqPlacement, MatMulWeightAxisIsLastDim) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  g.AddInput(x);
  ir::Value* k = g.CreateValue("k");
  g.AddInput(k);
  ir::Node* mm = g.AddNode("MatMul", {x, Weight(g, "W", {16, 8}, 0.1f)}, {"h"}, "", "proj").value();
  ir::Node* attn = g.AddNode("MatMul", {mm->output(0), k}, {"s"}, "", "qk").value();
  g.AddOutput(attn->output(0));
  auto sites = FindQdqSites(g, {});
  ASSERT_TRUE(sites.ok());
  ASSERT_EQ(sites->size(), 4u);
  EXPECT_EQ((*sites)[1].tensor, "W");
  EXPECT_EQ((*sites)[1].axis, 1);
  // activation x activation MatMul: both inputs per tensor.
  EXPECT_EQ((*sites)[2].role, quant::TensorRole::kActivation);
  EXPECT_EQ((*sites)[3].tensor, "k");
}

}  // namespace
}  // namespace quantkit::passes
