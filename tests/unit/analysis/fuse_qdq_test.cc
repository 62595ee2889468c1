// passes::FuseActivationQdq and the com.quantkit::FakeQuantizeLinear kernel it targets: the fused
// model computes the same bits as the Q/DQ model, overwrites a buffer only where the interpreter
// hands it over (never a fed tensor, never one another node still reads), and pairs that are not
// one per-tensor fake quantization stay two nodes.
#include "passes/fuse_activation_qdq.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "runtime/interpreter.h"

namespace quantkit::passes {
namespace {

using ir::Dim;
using ir::DType;
using ir::Tensor;

constexpr int64_t kElements = 2 * 3 * 17 * 19;  // not a multiple of any vector width

Tensor Input(float spread) {
  std::vector<float> v(kElements);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, spread);
  for (float& f : v) f = normal(rng);
  v[5] = 1e30f;
  v[6] = -1e30f;
  return Tensor::FromVector<float>(DType::kFloat, {2, 3, 17, 19}, v);
}

struct Shape {
  bool relu = true;              // x -> Relu -> Q/DQ, else the fed x itself is quantized
  bool relu_read_again = false;  // Add(DQ output, Relu output): the Relu output outlives the pair
  DType zp_type = DType::kInt8;
  bool per_channel = false;  // scale [3] along axis 1
};

ir::Model PairModel(const Shape& s) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(DType::kFloat,
                                 {Dim::Known(2), Dim::Known(3), Dim::Known(17), Dim::Known(19)});
  g.AddInput(x);
  ir::Value* a = x;
  if (s.relu) a = (*g.AddNode("Relu", {x}, {"r"}, "", "relu"))->output(0);
  ir::Value* scale =
      s.per_channel
          ? g.AddInitializer("s",
                             Tensor::FromVector<float>(DType::kFloat, {3}, {0.02f, 0.03f, 0.05f}))
          : g.AddInitializer("s", Tensor::FromVector<float>(DType::kFloat, {}, {0.0237f}));
  ir::Value* zp =
      s.zp_type == DType::kInt8
          ? g.AddInitializer(
                "z",
                Tensor::FromVector<int8_t>(
                    DType::kInt8, s.per_channel ? std::vector<int64_t>{3} : std::vector<int64_t>{},
                    std::vector<int8_t>(s.per_channel ? 3 : 1, -5)))
          : g.AddInitializer("z", Tensor::FromVector<uint8_t>(DType::kUint8, {}, {117}));
  ir::Node* q = *g.AddNode("QuantizeLinear", {a, scale, zp}, {"a_q"}, "", "q");
  ir::Node* dq = *g.AddNode("DequantizeLinear", {q->output(0), scale, zp}, {"a_dq"}, "", "dq");
  ir::Value* y = dq->output(0);
  if (s.relu_read_again) y = (*g.AddNode("Add", {y, a}, {"y"}, "", "add"))->output(0);
  g.AddOutput(y);
  return m;
}

std::vector<float> RunOn(ir::Model m, const Tensor& x) {
  auto it = runtime::Interpreter::Create(std::move(m));
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  auto out = (*it)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  const float* y = (*out)[0].tensor.data_as<float>();
  return std::vector<float>(y, y + (*out)[0].tensor.numel());
}

int Count(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(FuseActivationQdq, FusedModelsComputeTheSameBitsAndNeverWriteAFedOrStillReadTensor) {
  for (const Shape s : {Shape{true, false, DType::kInt8}, Shape{true, true, DType::kInt8},
                        Shape{false, false, DType::kInt8}, Shape{true, false, DType::kUint8}}) {
    const Tensor x = Input(2.0f);
    const Tensor x_copy = Input(2.0f);
    ir::Model fused = PairModel(s);
    auto report = RunPass(fused, FuseActivationQdq());
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->Count(counter::kActivationPairs), 1);
    EXPECT_EQ(Count(fused, "QuantizeLinear") + Count(fused, "DequantizeLinear"), 0);
    ASSERT_EQ(Count(fused, "FakeQuantizeLinear"), 1);
    EXPECT_NE(fused.graph->FindValue("a_dq"), nullptr)
        << "the output keeps DequantizeLinear's name";

    const std::vector<float> expected = RunOn(PairModel(s), x);
    EXPECT_TRUE(SameBits(RunOn(std::move(fused), x), expected))
        << "relu " << s.relu << " read again " << s.relu_read_again;
    EXPECT_TRUE(x.ContentEquals(x_copy)) << "the fed tensor was modified";
    // The runs quantized (the comparison is not between two copies of x): 1e30 saturates.
    if (!s.relu_read_again) {
      EXPECT_LT(expected[5], 10.0f);
    }
  }
}

TEST(FuseActivationQdq, LeavesPairsThatAreNotOnePerTensorFakeQuantization) {
  // Per-channel scales.
  Shape per_channel;
  per_channel.per_channel = true;
  ir::Model m = PairModel(per_channel);
  auto report = RunPass(m, FuseActivationQdq());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->Count(counter::kActivationPairs), 0);
  EXPECT_EQ(Count(m, "QuantizeLinear"), 1);

  // The quantized tensor has a second reader (a graph output): it must stay materialized.
  ir::Model shared = PairModel(Shape{});
  shared.graph->AddOutput(shared.graph->FindValue("a_q"));
  report = RunPass(shared, FuseActivationQdq());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->Count(counter::kActivationPairs), 0);

  // Different scales on Q and DQ (not a fake quantization).
  ir::Model rescaled = PairModel(Shape{});
  ir::Graph& g = *rescaled.graph;
  ir::Value* other = g.AddInitializer("s2", Tensor::FromVector<float>(DType::kFloat, {}, {0.5f}));
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "DequantizeLinear") g.SetNodeInput(n, 1, other);
  }
  report = RunPass(rescaled, FuseActivationQdq());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->Count(counter::kActivationPairs), 0);
  EXPECT_EQ(Count(rescaled, "DequantizeLinear"), 1);
}

}  // namespace
}  // namespace quantkit::passes
