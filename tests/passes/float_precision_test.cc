// passes/float_precision: the strongly typed writer. A small residual CNN goes through ApplyPlan
// (TensorRT placement, int8 weights) with plan.float_precision set, and the test checks the dtype
// of every tensor, where the Casts go (and that none separates a DequantizeLinear from its
// consumer), the FP32 islands the statistics, the initializers, the scales and the user ask for,
// and the opset upgrade. onnxruntime runs such models in e2e.strongly_typed.
#include "passes/float_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ir/float16.h"
#include "ir/verifier.h"
#include "passes/apply_plan.h"
#include "passes/upgrade_opset.h"

namespace quantkit::passes {
namespace {

using ir::Attribute;
using ir::Dim;
using ir::DType;
using ir::Tensor;
using ir::TypeInfo;

ir::Value* Init(ir::Graph& g, const std::string& name, std::vector<int64_t> dims, float base) {
  Tensor t(DType::kFloat, dims);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutable_data_as<float>()[i] = base * static_cast<float>((i % 7) - 3);
  return g.AddInitializer(name, std::move(t));
}

TypeInfo F32(std::vector<Dim> dims) { return TypeInfo::Tensor(DType::kFloat, std::move(dims)); }

// x -> conv1 -> relu(a) -> conv2(b) ; add(b, a) = c ; mul(c, k) = m ; gap(m) = d ; flatten = e ;
// fc(e) = logits ; softmax = y.   Types are declared on every value (as shape inference gives).
struct Net {
  ir::Model model;
  Net() {
    model.SetOpset("", 13);
    ir::Graph& g = *model.graph;
    const Dim n = Dim::Symbolic("N");
    ir::Value* x = g.CreateValue("x");
    x->type = F32({n, Dim::Known(3), Dim::Known(8), Dim::Known(8)});
    g.AddInput(x);
    auto add = [&](const std::string& op, std::vector<ir::Value*> in, const std::string& out,
                   TypeInfo t) {
      ir::Node* node = g.AddNode(op, in, {out}, "", op + "_" + out).value();
      node->output(0)->type = std::move(t);
      return node;
    };
    const TypeInfo act = F32({n, Dim::Known(4), Dim::Known(8), Dim::Known(8)});
    add("Conv", {x, Init(g, "w1", {4, 3, 3, 3}, 0.1f), Init(g, "b1", {4}, 0.01f)}, "c1", act)
        ->SetAttr(Attribute::Ints("pads", {1, 1, 1, 1}));
    add("Relu", {g.FindValue("c1")}, "a", act);
    add("Conv", {g.FindValue("a"), Init(g, "w2", {4, 4, 3, 3}, 0.2f)}, "b", act)
        ->SetAttr(Attribute::Ints("pads", {1, 1, 1, 1}));
    add("Add", {g.FindValue("b"), g.FindValue("a")}, "c", act);
    add("Mul", {g.FindValue("c"), Init(g, "k", {1}, 1.0f)}, "m", act);
    add("GlobalAveragePool", {g.FindValue("m")}, "d",
        F32({n, Dim::Known(4), Dim::Known(1), Dim::Known(1)}));
    add("Flatten", {g.FindValue("d")}, "e", F32({n, Dim::Known(4)}));
    add("Gemm", {g.FindValue("e"), Init(g, "fc.w", {10, 4}, 0.3f), Init(g, "fc.b", {10}, 0.01f)},
        "logits", F32({n, Dim::Known(10)}))
        ->SetAttr(Attribute::Int("transB", 1));
    add("Softmax", {g.FindValue("logits")}, "y", F32({n, Dim::Known(10)}));
    g.AddOutput(g.FindValue("y"));
  }

  // ApplyPlan with every activation at amax `amax` and `precision` as the plan's float part.
  Result<PassReport> Apply(const quant::FloatPrecision& precision, float amax = 4.0f) {
    auto sites = FindQdqSites(*model.graph, {});
    if (!sites.ok()) return sites.status();
    plan.float_precision = precision;
    for (const std::string& t : ActivationTensors(*sites)) plan.SetActivationAmax(t, amax, "max");
    ApplyPlanOptions options;
    options.mode = PlacementPolicy::kTensorRT;
    options.weight_storage = WeightStorage::kInt8;  // as the writers of model files
    return RunPass(model, ApplyPlan(&plan, options));
  }

  quant::QuantPlan plan;
};

quant::FloatPrecision Fp16() {
  quant::FloatPrecision p;
  p.dtype = quant::FloatDType::kFloat16;
  return p;
}

DType DTypeOf(const ir::Graph& g, const std::string& name) {
  const ir::Value* v = g.FindValue(name);
  EXPECT_NE(v, nullptr) << name;
  if (!v) return DType::kUndefined;
  return v->initializer ? v->initializer->dtype() : v->type.dtype;
}

const ir::Node* Producer(const ir::Graph& g, const std::string& name) {
  return g.FindValue(name)->producer();
}

int Count(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// TensorRT fuses a DQ into its consumer: no Cast may sit between them, and every DQ's scale has
// the dtype of its output (DequantizeLinear-19), every Q's scale the dtype of its input.
void ExpectQdqTypedAndUnblocked(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "Cast") {
      const ir::Node* p = n->input(0)->producer();
      EXPECT_FALSE(p && p->op_type() == "DequantizeLinear")
          << "Cast '" << n->name << "' after a DequantizeLinear";
    }
    if (n->op_type() == "DequantizeLinear") {
      EXPECT_EQ(n->input(1)->initializer->dtype(), n->output(0)->type.dtype) << n->name;
    }
    if (n->op_type() == "QuantizeLinear") {
      EXPECT_EQ(n->input(1)->initializer->dtype(), n->input(0)->type.dtype) << n->name;
      EXPECT_EQ(n->input(2)->initializer->dtype(), DType::kInt8) << n->name;
    }
  }
}

TEST(ConvertFloatPrecision, Fp32DoesNothing) {
  Net net;
  auto r = net.Apply(quant::FloatPrecision{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(net.model.OpsetFor(""), 13);
  EXPECT_EQ(Count(*net.model.graph, "Cast"), 0);
  EXPECT_EQ(DTypeOf(*net.model.graph, "m"), DType::kFloat);
}

TEST(ConvertFloatPrecision, EveryFloatTensorInFp16ButTheModelsInputsAndOutputs) {
  Net net;
  auto r = net.Apply(Fp16());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(net.model.OpsetFor(""), kFloat16QdqOpset);
  EXPECT_GE(net.model.ir_version, kFloat16QdqIrVersion);
  // The user's input and output keep float32: one Cast after x, one before y (named y).
  EXPECT_EQ(DTypeOf(g, "x"), DType::kFloat);
  EXPECT_EQ(DTypeOf(g, "y"), DType::kFloat);
  EXPECT_EQ(Producer(g, "y")->op_type(), "Cast");
  EXPECT_EQ(Count(g, "Cast"), 2);
  EXPECT_EQ(r->Count(counter::kCastsInserted), 2);
  EXPECT_EQ(r->Count(counter::kFp32Nodes), 0);
  // Every other float tensor and initializer: FP16 (weights: int8 behind an FP16 DQ).
  for (const ir::Value* v : g.values()) {
    if (v == g.FindValue("x") || v == g.FindValue("y")) continue;
    const DType d = v->initializer ? v->initializer->dtype() : v->type.dtype;
    EXPECT_NE(d, DType::kFloat) << "'" << v->name() << "' is still float32";
  }
  for (const char* name :
       {"c1", "a", "b", "c", "m", "d", "e", "logits", "b1", "fc.b", "k", "w1", "w2", "fc.w"}) {
    EXPECT_EQ(DTypeOf(g, name), DType::kFloat16) << name;
  }
  EXPECT_EQ(Producer(g, "w1")->input(0)->initializer->dtype(), DType::kInt8);
  ExpectQdqTypedAndUnblocked(g);
  // Scales are the FP32 ones rounded to nearest even.
  const ir::Node* dq = Producer(g, "w1");
  const quant::TensorQuant* w1 = net.plan.Find("w1");
  ASSERT_NE(w1, nullptr);
  for (size_t c = 0; c < w1->scale.size(); ++c) {
    EXPECT_EQ(dq->input(1)->initializer->data_as<uint16_t>()[c], ir::FloatToHalf(w1->scale[c]))
        << c;
  }
  EXPECT_TRUE(ir::Verify(net.model).ok());
}

TEST(ConvertFloatPrecision, CastIoConvertsInputsAndOutputsToo) {
  Net net;
  quant::FloatPrecision p = Fp16();
  p.cast_io = true;
  ASSERT_TRUE(net.Apply(p).ok());
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(Count(g, "Cast"), 0);
  EXPECT_EQ(DTypeOf(g, "x"), DType::kFloat16);
  EXPECT_EQ(DTypeOf(g, "y"), DType::kFloat16);
}

// An activation whose calibrated range FP16 cannot hold keeps its producer and its consumers in
// FP32; the test fails if that region goes FP16.
TEST(ConvertFloatPrecision, TensorBeyondFp16RangeKeepsItsRegionInFp32) {
  Net net;
  quant::FloatPrecision p = Fp16();
  p.fp32_tensors["m"] = FloatRangeProblem(1.0e5f, quant::FloatDType::kFloat16);
  ASSERT_FALSE(p.fp32_tensors["m"].empty());
  auto r = net.Apply(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(DTypeOf(g, "m"), DType::kFloat) << "the overflowing tensor went FP16";
  const ir::Node* mul = Producer(g, "m");
  for (const ir::Value* in : mul->inputs())
    EXPECT_EQ(in->initializer ? in->initializer->dtype() : in->type.dtype, DType::kFloat);
  // The consumer of m (the quantized GAP input: Q in FP32, its DQ read by the GAP in FP32).
  const ir::Node* q = g.FindValue("m")->uses()[0].node;
  ASSERT_EQ(q->op_type(), "QuantizeLinear");
  const ir::Node* gap = q->output(0)->uses()[0].node->output(0)->uses()[0].node;
  ASSERT_EQ(gap->op_type(), "GlobalAveragePool");
  EXPECT_EQ(gap->input(0)->type.dtype, DType::kFloat);
  EXPECT_EQ(gap->output(0)->type.dtype, DType::kFloat);
  // Outside the region: FP16 again, through Casts.
  EXPECT_EQ(DTypeOf(g, "c"), DType::kFloat16);
  EXPECT_EQ(DTypeOf(g, "logits"), DType::kFloat16);
  EXPECT_EQ(r->Count(counter::kFp32Nodes), 2);  // Mul and GlobalAveragePool
  ExpectQdqTypedAndUnblocked(g);
  EXPECT_TRUE(ir::Verify(net.model).ok());
}

TEST(ConvertFloatPrecision, RangeProblems) {
  using quant::FloatDType;
  EXPECT_EQ(FloatRangeProblem(100.0f, FloatDType::kFloat16), "");
  EXPECT_EQ(FloatRangeProblem(ir::kFloat16Max / kFloat16RangeMargin, FloatDType::kFloat16), "");
  EXPECT_NE(FloatRangeProblem(ir::kFloat16Max / kFloat16RangeMargin * 1.01f, FloatDType::kFloat16),
            "");
  EXPECT_NE(FloatRangeProblem(1e-6f, FloatDType::kFloat16), "");  // every value subnormal
  EXPECT_EQ(FloatRangeProblem(0.0f, FloatDType::kFloat16), "");   // all zero: nothing to lose
  EXPECT_EQ(FloatRangeProblem(1.0e5f, FloatDType::kBFloat16), "");
  EXPECT_EQ(FloatRangeProblem(1.0e5f, FloatDType::kFloat32), "");
}

// Issue 29: a writer given no --float-dtype writes FP16 outside the INT8 layers (what a TensorRT 11
// engine should run); FP32 is asked for by name.
TEST(ConvertFloatPrecision, DefaultFloatDTypeIsFp16) {
  EXPECT_EQ(kDefaultFloatDType, quant::FloatDType::kFloat16);
  EXPECT_EQ(FloatOptions{}.dtype, quant::FloatDType::kFloat16);
  // A plan.json without float_precision was written before the option existed: FP32, as it was.
  EXPECT_EQ(quant::FloatPrecision{}.dtype, quant::FloatDType::kFloat32);
}

// A plan read without statistics (a TensorRT cache, a ranges file) has a range for every
// activation it names: those FP16 cannot hold become FP32 islands, weights are not looked at.
TEST(ConvertFloatPrecision, MarkPlanRangeFp32TensorsUsesThePlansActivationRanges) {
  quant::QuantPlan plan;
  plan.float_precision.dtype = quant::FloatDType::kFloat16;
  plan.SetActivationAmax("fine", 4.0f, "cache");
  plan.SetActivationAmax("zero", 0.0f, "cache");
  plan.SetActivationAmax("huge", 1.0e5f, "cache");
  plan.SetActivationAmax("tiny", 1.0e-6f, "cache");
  plan.SetScale("w", {1.0e5f / 127.0f}, -1, quant::TensorRole::kWeight, "max");
  EXPECT_EQ(MarkPlanRangeFp32Tensors(&plan), 2);
  const auto& fp32 = plan.float_precision.fp32_tensors;
  ASSERT_EQ(fp32.size(), 2u);
  ASSERT_TRUE(fp32.count("huge") && fp32.count("tiny"));
  EXPECT_NE(fp32.at("huge").find("(the plan's range)"), std::string::npos) << fp32.at("huge");
  EXPECT_NE(fp32.at("tiny").find("(the plan's range)"), std::string::npos) << fp32.at("tiny");
  EXPECT_EQ(MarkPlanRangeFp32Tensors(&plan), 0);  // already there: nothing added twice

  // A reason already recorded (measured on data) is kept, not replaced by the plan's.
  quant::QuantPlan measured = plan;
  measured.float_precision.fp32_tensors = {{"huge", "measured"}};
  EXPECT_EQ(MarkPlanRangeFp32Tensors(&measured), 1);
  EXPECT_EQ(measured.float_precision.fp32_tensors.at("huge"), "measured");

  // FP32 and BF16 hold 1e5; only BF16's smallest normal is far below 1e-6.
  for (quant::FloatDType wide : {quant::FloatDType::kFloat32, quant::FloatDType::kBFloat16}) {
    quant::QuantPlan other = plan;
    other.float_precision.dtype = wide;
    other.float_precision.fp32_tensors.clear();
    EXPECT_EQ(MarkPlanRangeFp32Tensors(&other), 0) << quant::FloatDTypeName(wide);
  }
}

TEST(ConvertFloatPrecision, PinnedNodesAndOpTypesStayFp32AndUnknownNamesFail) {
  Net net;
  quant::FloatPrecision p;
  FloatOptions o;
  o.dtype = quant::FloatDType::kFloat16;
  o.keep_fp32 = {"Softmax", "Add_c"};
  ASSERT_TRUE(ResolveFloatOptions(*net.model.graph, o, &p).ok());
  EXPECT_EQ(p.fp32_op_types.count("Softmax"), 1u);
  EXPECT_EQ(p.fp32_nodes.count("Add_c"), 1u);
  auto r = net.Apply(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ir::Graph& g = *net.model.graph;
  EXPECT_EQ(DTypeOf(g, "c"), DType::kFloat);
  EXPECT_EQ(Producer(g, "y")->op_type(), "Softmax");  // FP32 already: no output Cast
  EXPECT_EQ(DTypeOf(g, "y"), DType::kFloat);
  ExpectQdqTypedAndUnblocked(g);

  quant::FloatPrecision q;
  o.keep_fp32 = {"Sofmax"};
  const Status missing = ResolveFloatOptions(*Net().model.graph, o, &q);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("Softmax"), std::string::npos)
      << missing.message();  // the close name
}

// The tensor `a` feeds conv2 and the residual Add through one shared Q/DQ pair; with the Add
// pinned to FP32 the pair is copied, so that each consumer reads a DQ of its own dtype and no Cast
// separates a DQ from its consumer.
TEST(ConvertFloatPrecision, ConsumersOfDifferentDtypesGetTheirOwnDequantize) {
  Net net;
  quant::FloatPrecision p = Fp16();
  p.fp32_nodes["Add_c"] = "test";
  ASSERT_TRUE(net.Apply(p).ok());
  const ir::Graph& g = *net.model.graph;
  const ir::Node* add = Producer(g, "c");
  const ir::Node* dq_add = add->input(1)->producer();
  ASSERT_EQ(dq_add->op_type(), "DequantizeLinear");
  EXPECT_EQ(dq_add->output(0)->type.dtype, DType::kFloat);
  const ir::Node* conv2 = Producer(g, "b");
  const ir::Node* dq_conv = conv2->input(0)->producer();
  ASSERT_EQ(dq_conv->op_type(), "DequantizeLinear");
  EXPECT_EQ(dq_conv->output(0)->type.dtype, DType::kFloat16);
  EXPECT_NE(dq_add, dq_conv);
  ExpectQdqTypedAndUnblocked(g);
  EXPECT_TRUE(ir::Verify(net.model).ok());
}

// A constant FP16 turns into 0 (a BERT-style epsilon) or inf keeps its reader in FP32.
TEST(ConvertFloatPrecision, InitializersFp16CannotHoldKeepTheirReaderFp32) {
  for (float k : {1e-12f, 1e6f}) {
    Net net;
    net.model.graph->FindValue("k")->initializer->mutable_data_as<float>()[0] = k;
    auto r = net.Apply(Fp16());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(DTypeOf(*net.model.graph, "m"), DType::kFloat) << k;
    EXPECT_EQ(DTypeOf(*net.model.graph, "k"), DType::kFloat) << k;
    ASSERT_EQ(r->List(list::kFp32NodeReasons).size(), 1u);
    EXPECT_NE(r->List(list::kFp32NodeReasons)[0].find("initializer 'k'"), std::string::npos);
  }
}

// A scale FP16 stores more than half an INT8 step off (subnormal) keeps that DQ in FP32.
TEST(ConvertFloatPrecision, ScaleFp16CannotHoldKeepsItsDequantizeFp32) {
  Net net;
  auto r = net.Apply(Fp16(), /*amax=*/1e-5f);  // scale 7.9e-8: 1.3 FP16 subnormal steps
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ir::Graph& g = *net.model.graph;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() != "DequantizeLinear" || n->input(0)->is_constant()) continue;
    EXPECT_EQ(n->output(0)->type.dtype, DType::kFloat) << n->name;
  }
  EXPECT_GT(r->Count(counter::kFp32Nodes), 0);
  ExpectQdqTypedAndUnblocked(g);
}

TEST(UpgradeOpset, ReductionAxesBecomeAnInputAndRoiAlignKeepsItsMode) {
  ir::Model model;
  model.SetOpset("", 13);
  ir::Graph& g = *model.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = F32({Dim::Known(2), Dim::Known(3)});
  g.AddInput(x);
  ir::Node* mean = g.AddNode("ReduceMean", {x}, {"m"}, "", "mean").value();
  mean->SetAttr(Attribute::Ints("axes", {1}));
  g.AddOutput(mean->output(0));
  auto r = RunPass(model, UpgradeOpset());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(model.OpsetFor(""), 19);
  EXPECT_FALSE(mean->has_attr("axes"));
  ASSERT_EQ(mean->num_inputs(), 2u);
  const ir::Tensor& axes = *mean->input(1)->initializer;
  EXPECT_EQ(axes.dtype(), DType::kInt64);
  EXPECT_EQ(axes.data_as<int64_t>()[0], 1);
  auto again = RunPass(model, UpgradeOpset());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
}

}  // namespace
}  // namespace quantkit::passes
