// SmoothQuant's graph side (passes/smoothquant.h) on hand-checkable models: LayerNormalization
// -> MatMul with one outlier input channel (the scales, the folded scale and bias, the smoothed
// weight, the unchanged FP32 function, the smaller quantization error), Conv -> Relu -> Conv (the
// fold through Relu into the first Conv), an affine with one-value constants before a Conv (made
// per channel), and the layers it must leave alone, with the reason.
#include "passes/smoothquant.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ir/clone.h"
#include "passes/apply_plan.h"
#include "runtime/interpreter.h"
#include "testing/tolerances.h"

namespace quantkit::passes {
namespace {

constexpr int64_t kRows = 64, kChannels = 4, kOut = 3;
constexpr int64_t kOutlier = 2;  // the LayerNormalization scale makes this channel ~30x the others

ir::Tensor Floats(std::vector<int64_t> dims, const std::vector<float>& v) {
  return ir::Tensor::FromVector(ir::DType::kFloat, std::move(dims), v);
}

// x[64,4] -> LayerNormalization(g, b) -> y -> MatMul(W[4,3]) -> out.
// `y_also_feeds`: an op type that reads y too (the group must then be skipped).
ir::Model LayerNormMatMul(const std::string& y_also_feeds = "") {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type =
      ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(kRows), ir::Dim::Known(kChannels)});
  g.AddInput(x);
  ir::Value* scale = g.AddInitializer("g", Floats({kChannels}, {1.0f, 0.5f, 30.0f, 1.5f}));
  ir::Value* bias = g.AddInitializer("b", Floats({kChannels}, {0.1f, -0.2f, 0.3f, 0.0f}));
  std::vector<float> w(kChannels * kOut);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.1f * static_cast<float>(static_cast<int>(i * 5 % 7) - 3) + 0.05f;
  ir::Value* weight = g.AddInitializer("W", Floats({kChannels, kOut}, w));
  auto ln = g.AddNode("LayerNormalization", {x, scale, bias}, {"y"}, "", "ln");
  EXPECT_TRUE(ln.ok());
  (*ln)->SetAttr(ir::Attribute::Int("axis", -1));
  auto mm = g.AddNode("MatMul", {(*ln)->output(0), weight}, {"out"}, "", "fc");
  EXPECT_TRUE(mm.ok());
  g.AddOutput((*mm)->output(0));
  if (!y_also_feeds.empty()) {
    auto other = g.AddNode(y_also_feeds, {(*ln)->output(0)}, {"side"}, "", "side");
    EXPECT_TRUE(other.ok());
    g.AddOutput((*other)->output(0));
  }
  return m;
}

ir::Tensor Input() {
  std::vector<float> x(kRows * kChannels);
  for (int64_t n = 0; n < kRows; ++n) {
    for (int64_t j = 0; j < kChannels; ++j) {
      x[static_cast<size_t>(n * kChannels + j)] =
          std::sin(1.3f * static_cast<float>(n) + 0.7f * static_cast<float>(j)) *
          static_cast<float>(j + 1);
    }
  }
  return Floats({kRows, kChannels}, x);
}

// The plan entries FindSmoothGroups looks for: y and W quantized.
quant::QuantPlan PlanFor(const std::vector<std::string>& activations,
                         const std::vector<std::string>& weights) {
  quant::QuantPlan plan;
  for (const std::string& a : activations)
    plan.SetScale(a, {0.1f}, -1, quant::TensorRole::kActivation, "max");
  for (const std::string& w : weights)
    plan.SetScale(w, {0.01f}, -1, quant::TensorRole::kWeight, "max");
  return plan;
}

// The model's outputs, then the value `also` (an inner tensor, made an output of a copy).
std::vector<ir::Tensor> RunModel(const ir::Model& model,
                                 const std::vector<runtime::NamedTensor>& feeds,
                                 const std::string& also) {
  auto copy = ir::CloneModel(model);
  EXPECT_TRUE(copy.ok());
  copy->graph->AddOutput(copy->graph->FindValue(also));
  auto interp = runtime::Interpreter::Create(std::move(*copy));
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  auto outs = (*interp)->Run(feeds);
  EXPECT_TRUE(outs.ok()) << outs.status().ToString();
  std::vector<ir::Tensor> t;
  for (auto& o : *outs) t.push_back(o.tensor);
  return t;
}

ir::Model WithEdits(const ir::Model& model, const std::map<std::string, ir::Tensor>& edits) {
  auto copy = ir::CloneModel(model);
  EXPECT_TRUE(copy.ok());
  quant::QuantPlan plan;
  for (const auto& [name, t] : edits) plan.initializers[name] = {t, "smoothquant"};
  EXPECT_TRUE(passes::ApplyInitializerOverrides(plan, &*copy).ok());
  return std::move(*copy);
}

float MaxAbs(const ir::Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.data_as<float>()[i]));
  return m;
}

// Relative squared error of X W with X fake-quantized per tensor and W per output column (INT8,
// symmetric, the scales TensorRT's recipe uses): sum (Xq Wq - X W)^2 / sum (X W)^2.
double QuantizedMatMulError(const ir::Tensor& x, const ir::Tensor& w) {
  const int64_t rows = x.dims()[0], k = x.dims()[1], n = w.dims()[1];
  auto fake = [](float v, float s) {
    return std::clamp(std::nearbyint(v / s), -127.0f, 127.0f) * s;
  };
  const float sx = MaxAbs(x) / 127.0f;
  std::vector<float> sw(static_cast<size_t>(n), 0.0f);
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t c = 0; c < n; ++c)
      sw[c] = std::max(sw[c], std::fabs(w.data_as<float>()[j * n + c]) / 127.0f);
  }
  double err = 0, ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double exact = 0, quantized = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float xv = x.data_as<float>()[r * k + j], wv = w.data_as<float>()[j * n + c];
        exact += static_cast<double>(xv) * wv;
        quantized += static_cast<double>(fake(xv, sx)) * fake(wv, sw[c]);
      }
      err += (quantized - exact) * (quantized - exact);
      ref += exact * exact;
    }
  }
  return err / ref;
}

TEST(SmoothQuant, ScalesHandChecked) {
  const std::vector<float> s =
      SmoothingScales({4.0f, 9.0f, 0.0f, 1.0f}, {1.0f, 4.0f, 2.0f, 0.0f}, 0.5);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FLOAT_EQ(s[0], 2.0f);                                     // sqrt(4) / sqrt(1)
  EXPECT_FLOAT_EQ(s[1], 1.5f);                                     // sqrt(9) / sqrt(4)
  EXPECT_EQ(s[2], 1.0f);                                           // no activation: left alone
  EXPECT_EQ(s[3], 1.0f);                                           // no weight: left alone
  EXPECT_FLOAT_EQ(SmoothingScales({8.0f}, {2.0f}, 1.0)[0], 8.0f);  // alpha 1: all of max|X|
  EXPECT_FLOAT_EQ(SmoothingScales({8.0f}, {2.0f}, 0.0)[0], 0.5f);  // alpha 0: 1 / max|W|
  EXPECT_EQ(SmoothingScales({1e-20f}, {1.0f}, 1.0)[0], kMinSmoothScale);  // clamped
}

TEST(SmoothQuant, LayerNormMatMulFoldsAndKeepsTheFunction) {
  const ir::Model model = LayerNormMatMul();
  const quant::QuantPlan plan = PlanFor({"y"}, {"W"});
  std::vector<SmoothSkip> skipped;
  auto groups = FindSmoothGroups(model, plan, &skipped);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  EXPECT_TRUE(skipped.empty());
  ASSERT_EQ(groups->size(), 1u);
  const SmoothGroup& group = groups->front();
  EXPECT_EQ(group.activation, "y");
  EXPECT_EQ(group.channels, kChannels);
  EXPECT_EQ(group.channel_axis, -1);
  ASSERT_EQ(group.weights.size(), 1u);
  EXPECT_EQ(group.weights[0].initializer, "W");
  EXPECT_EQ(group.weights[0].axis, 0);  // MatMul's weight rows are its input channels
  ASSERT_EQ(group.folds.size(), 2u);
  EXPECT_EQ(group.folds[0].initializer, "g");
  EXPECT_EQ(group.folds[1].initializer, "b");

  const std::vector<runtime::NamedTensor> feeds{{"x", Input()}};
  const std::vector<ir::Tensor> before = RunModel(model, feeds, "y");  // out, y
  const std::vector<float> act_max = ChannelAbsMax(before[1], -1);
  EXPECT_EQ(std::max_element(act_max.begin(), act_max.end()) - act_max.begin(), kOutlier);
  auto w_max = GroupWeightMax(model, group, {});
  ASSERT_TRUE(w_max.ok());
  const ir::Tensor& w = *model.graph->FindValue("W")->initializer;
  EXPECT_EQ(*w_max, ChannelAbsMax(w, 0));
  const std::vector<float> s = SmoothingScales(act_max, *w_max, 0.5);
  for (int64_t j = 0; j < kChannels; ++j) {
    EXPECT_NEAR(s[j], std::sqrt(act_max[j] / (*w_max)[j]), 1e-6 * s[j]) << "channel " << j;
  }

  std::map<std::string, ir::Tensor> edits;
  ASSERT_TRUE(ApplySmoothing(model, group, s, &edits).ok());
  ASSERT_EQ(edits.size(), 3u);
  const float* g0 = model.graph->FindValue("g")->initializer->data_as<float>();
  const float* b0 = model.graph->FindValue("b")->initializer->data_as<float>();
  for (int64_t j = 0; j < kChannels; ++j) {
    EXPECT_FLOAT_EQ(edits.at("g").data_as<float>()[j], g0[j] / s[j]);
    EXPECT_FLOAT_EQ(edits.at("b").data_as<float>()[j], b0[j] / s[j]);
    for (int64_t c = 0; c < kOut; ++c) {
      EXPECT_FLOAT_EQ(edits.at("W").data_as<float>()[j * kOut + c],
                      w.data_as<float>()[j * kOut + c] * s[j]);
    }
  }

  // The float model computes the same function; y itself is divided by s per channel.
  const ir::Model smoothed = WithEdits(model, edits);
  const std::vector<ir::Tensor> after = RunModel(smoothed, feeds, "y");
  const double tol = testing::kSmoothFoldRtol * MaxAbs(before[0]);
  for (int64_t i = 0; i < before[0].numel(); ++i) {
    EXPECT_NEAR(after[0].data_as<float>()[i], before[0].data_as<float>()[i], tol) << "output " << i;
  }
  const std::vector<float> smoothed_max = ChannelAbsMax(after[1], -1);
  for (int64_t j = 0; j < kChannels; ++j)
    EXPECT_NEAR(smoothed_max[j], act_max[j] / s[j], 1e-5 * act_max[j] / s[j]);

  // INT8 with y per tensor and W per output channel: the outlier channel no longer sets y's scale.
  const double error_before = QuantizedMatMulError(before[1], w);
  const double error_after = QuantizedMatMulError(after[1], edits.at("W"));
  EXPECT_LT(error_after, 0.5 * error_before) << error_before << " -> " << error_after;
}

TEST(SmoothQuant, ConvReluConvFoldsIntoTheFirstConv) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(2), ir::Dim::Known(1),
                                                     ir::Dim::Known(5), ir::Dim::Known(5)});
  g.AddInput(x);
  std::vector<float> w1(3 * 1 * 3 * 3), w2(2 * 3 * 1 * 1);
  for (size_t i = 0; i < w1.size(); ++i)
    w1[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * (i < 9 ? 10.0f : 1.0f);
  for (size_t i = 0; i < w2.size(); ++i)
    w2[i] = 0.25f * static_cast<float>(static_cast<int>(i % 3) - 1) + 0.1f;
  ir::Value* c1w = g.AddInitializer("W1", Floats({3, 1, 3, 3}, w1));
  ir::Value* c1b = g.AddInitializer("B1", Floats({3}, {1.0f, -0.5f, 0.25f}));
  ir::Value* c2w = g.AddInitializer("W2", Floats({2, 3, 1, 1}, w2));
  auto conv1 = g.AddNode("Conv", {x, c1w, c1b}, {"h"}, "", "conv1");
  ASSERT_TRUE(conv1.ok());
  auto relu = g.AddNode("Relu", {(*conv1)->output(0)}, {"r"}, "", "relu");
  ASSERT_TRUE(relu.ok());
  auto conv2 = g.AddNode("Conv", {(*relu)->output(0), c2w}, {"out"}, "", "conv2");
  ASSERT_TRUE(conv2.ok());
  g.AddOutput((*conv2)->output(0));
  // conv1 reads the graph input: no producer to fold into, so it is skipped with the reason.
  std::vector<SmoothSkip> skipped;
  auto groups = FindSmoothGroups(m, PlanFor({"x", "r"}, {"W1", "W2"}), &skipped);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), 1u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].node, "conv1");
  EXPECT_NE(skipped[0].reason.find("graph input"), std::string::npos) << skipped[0].reason;
  const SmoothGroup& group = groups->front();
  EXPECT_EQ(group.activation, "r");
  EXPECT_EQ(group.channel_axis, 1);
  EXPECT_EQ(group.weights[0].axis, 1);  // the kernel's input-channel axis
  ASSERT_EQ(group.folds.size(), 2u);    // W1's output channels and B1
  EXPECT_EQ(group.folds[0].initializer, "W1");
  EXPECT_EQ(group.folds[0].axis, 0);
  EXPECT_EQ(group.folds[1].initializer, "B1");

  std::vector<float> xs(2 * 25);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(0.9f * static_cast<float>(i));
  const std::vector<runtime::NamedTensor> feeds{{"x", Floats({2, 1, 5, 5}, xs)}};
  const std::vector<ir::Tensor> before = RunModel(m, feeds, "r");
  auto w_max = GroupWeightMax(m, group, {});
  ASSERT_TRUE(w_max.ok());
  const std::vector<float> s = SmoothingScales(ChannelAbsMax(before[1], 1), *w_max, 0.5);
  std::map<std::string, ir::Tensor> edits;
  ASSERT_TRUE(ApplySmoothing(m, group, s, &edits).ok());
  const std::vector<ir::Tensor> after = RunModel(WithEdits(m, edits), feeds, "r");
  const double tol = testing::kSmoothFoldRtol * MaxAbs(before[0]);
  for (int64_t i = 0; i < before[0].numel(); ++i) {
    EXPECT_NEAR(after[0].data_as<float>()[i], before[0].data_as<float>()[i], tol) << "output " << i;
  }
}

// x -> Conv(W1, B1) -> Sigmoid -> Mul(a) -> Add(b) -> z -> Conv(W2) -> out, a and b one value each:
// PP-LCNetV3's learnable affine block after an activation (PP-OCRv4). `through_sigmoid` false:
// x -> Conv(W1, B1) -> Add(b) -> z, so 1/s reaches the first Conv through the Add.
// `depthwise`: the second Conv is depthwise (3 kernels [1, 1, 1], group 3) with 3 outputs.
ir::Model AffineBeforeConv(bool through_sigmoid, bool depthwise = false) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(2), ir::Dim::Known(1),
                                                     ir::Dim::Known(5), ir::Dim::Known(5)});
  g.AddInput(x);
  std::vector<float> w1(3 * 1 * 3 * 3), w2(depthwise ? 3 : 2 * 3 * 1 * 1);
  // Channel 0 of W1 is 20x the others: an outlier channel of z.
  for (size_t i = 0; i < w1.size(); ++i)
    w1[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * (i < 9 ? 2.0f : 0.1f);
  for (size_t i = 0; i < w2.size(); ++i)
    w2[i] = 0.25f * static_cast<float>(static_cast<int>(i % 3) - 1) + 0.1f;
  ir::Value* c1w = g.AddInitializer("W1", Floats({3, 1, 3, 3}, w1));
  ir::Value* c1b = g.AddInitializer("B1", Floats({3}, {1.0f, -0.5f, 0.25f}));
  ir::Value* a = g.AddInitializer("a", Floats({}, {3.0f}));
  ir::Value* b = g.AddInitializer("b", Floats({1}, {-0.5f}));
  ir::Value* c2w = g.AddInitializer(
      "W2",
      Floats(depthwise ? std::vector<int64_t>{3, 1, 1, 1} : std::vector<int64_t>{2, 3, 1, 1}, w2));
  auto conv1 = g.AddNode("Conv", {x, c1w, c1b}, {"h"}, "", "conv1");
  EXPECT_TRUE(conv1.ok());
  ir::Value* y = (*conv1)->output(0);
  if (through_sigmoid) {
    auto sig = g.AddNode("Sigmoid", {y}, {"act"}, "", "act");
    EXPECT_TRUE(sig.ok());
    auto mul = g.AddNode("Mul", {a, (*sig)->output(0)}, {"scaled"}, "",
                         "lab_scale");  // the constant first
    EXPECT_TRUE(mul.ok());
    y = (*mul)->output(0);
  }
  auto add = g.AddNode("Add", {y, b}, {"z"}, "", "lab_bias");
  EXPECT_TRUE(add.ok());
  auto conv2 = g.AddNode("Conv", {(*add)->output(0), c2w}, {"out"}, "", "conv2");
  EXPECT_TRUE(conv2.ok());
  if (depthwise) (*conv2)->SetAttr(ir::Attribute::Int("group", 3));
  g.AddOutput((*conv2)->output(0));
  for (ir::Value* v : {y, (*add)->output(0)}) {
    v->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(2), ir::Dim::Known(3),
                                                       ir::Dim::Known(5), ir::Dim::Known(5)});
  }
  if (through_sigmoid) {
    (*conv1)->output(0)->type = y->type;
    g.FindValue("act")->type = y->type;
  }
  return m;
}

TEST(SmoothQuant, AffineWithScalarConstantsTakesTheScalePerChannel) {
  for (const auto& [through_sigmoid, depthwise] :
       {std::pair{true, false}, {false, false}, {true, true}}) {
    SCOPED_TRACE(fmt::format("{}{}",
                             through_sigmoid ? "Sigmoid -> Mul(a) -> Add(b)" : "Conv -> Add(b)",
                             depthwise ? ", then a depthwise Conv" : ""));
    const ir::Model m = AffineBeforeConv(through_sigmoid, depthwise);
    std::vector<SmoothSkip> skipped;
    auto groups = FindSmoothGroups(m, PlanFor({"z"}, {"W2"}), &skipped);
    ASSERT_TRUE(groups.ok()) << groups.status().ToString();
    ASSERT_EQ(groups->size(), 1u) << (skipped.empty() ? "" : skipped[0].reason);
    const SmoothGroup& group = groups->front();
    EXPECT_EQ(group.activation, "z");
    EXPECT_EQ(group.channel_axis, 1);
    EXPECT_EQ(group.weights[0].axis, depthwise ? 0 : 1);  // a depthwise kernel per input channel
    // b, then a (Sigmoid stops the walk: a scales its output alone), or b, W1 and B1.
    std::vector<std::string> folded;
    for (const AxisEdit& f : group.folds) folded.push_back(f.initializer);
    const std::vector<std::string> expected = through_sigmoid
                                                  ? std::vector<std::string>{"b", "a"}
                                                  : std::vector<std::string>{"b", "W1", "B1"};
    EXPECT_EQ(folded, expected);
    EXPECT_EQ(group.folds[0].expand,
              (std::vector<int64_t>{3, 1, 1}));  // one value per channel of [N, 3, H, W]

    std::vector<float> xs(2 * 25);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(0.9f * static_cast<float>(i));
    const std::vector<runtime::NamedTensor> feeds{{"x", Floats({2, 1, 5, 5}, xs)}};
    const std::vector<ir::Tensor> before = RunModel(m, feeds, "z");
    auto w_max = GroupWeightMax(m, group, {});
    ASSERT_TRUE(w_max.ok());
    const std::vector<float> z_max = ChannelAbsMax(before[1], 1);
    const std::vector<float> s = SmoothingScales(z_max, *w_max, 0.5);
    std::map<std::string, ir::Tensor> edits;
    ASSERT_TRUE(ApplySmoothing(m, group, s, &edits).ok());
    EXPECT_EQ(edits.at("b").dims(), (std::vector<int64_t>{3, 1, 1}));
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_FLOAT_EQ(edits.at("b").data_as<float>()[c], -0.5f / s[static_cast<size_t>(c)]);
    const ir::Model smoothed = WithEdits(m, edits);
    const std::vector<ir::Tensor> after = RunModel(smoothed, feeds, "z");
    // The same function, and z's channels flatter: z / s per channel.
    const double tol = testing::kSmoothFoldRtol * MaxAbs(before[0]);
    for (int64_t i = 0; i < before[0].numel(); ++i) {
      EXPECT_NEAR(after[0].data_as<float>()[i], before[0].data_as<float>()[i], tol)
          << "output " << i;
    }
    const std::vector<float> z_after = ChannelAbsMax(after[1], 1);
    auto spread = [](const std::vector<float>& v) {
      return *std::max_element(v.begin(), v.end()) / *std::min_element(v.begin(), v.end());
    };
    EXPECT_LT(spread(z_after), spread(z_max));
    // The written model's initializer and its type are [3, 1, 1].
    EXPECT_EQ(smoothed.graph->FindValue("b")->type.ConcreteDims(), (std::vector<int64_t>{3, 1, 1}));
  }
}

TEST(SmoothQuant, OnlyAOneValueOperandMayChangeItsDims) {
  const ir::Model m = AffineBeforeConv(true);
  // A [5, 1, 1] value for b does not broadcast against z's 3 channels; W2 in another shape is a
  // plan for another model.
  for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"b", {5, 1, 1}}, {"W2", {2, 3, 1, 1, 1}}, {"b", {1, 1, 3, 1, 1}}}) {
    SCOPED_TRACE(name);
    auto copy = ir::CloneModel(m);
    ASSERT_TRUE(copy.ok());
    quant::QuantPlan plan;
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    plan.initializers[name] = {Floats(dims, std::vector<float>(static_cast<size_t>(n), 1.0f)),
                               "smoothquant"};
    const Status st = passes::ApplyInitializerOverrides(plan, &*copy);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("have dims"), std::string::npos) << st.message();
  }
}

TEST(SmoothQuant, LeavesAloneWhatCannotTakeTheScale) {
  // y also feeds a Sigmoid, which is not positively homogeneous: the layer is skipped.
  std::vector<SmoothSkip> skipped;
  auto groups = FindSmoothGroups(LayerNormMatMul("Sigmoid"), PlanFor({"y"}, {"W"}), &skipped);
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].node, "fc");
  EXPECT_NE(skipped[0].reason.find("Sigmoid"), std::string::npos) << skipped[0].reason;
  // Shape reads only y's shape: the group stands.
  skipped.clear();
  groups = FindSmoothGroups(LayerNormMatMul("Shape"), PlanFor({"y"}, {"W"}), &skipped);
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->size(), 1u);
  // y not quantized: nothing to smooth.
  skipped.clear();
  groups = FindSmoothGroups(LayerNormMatMul(), PlanFor({}, {"W"}), &skipped);
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].reason.find("not quantized"), std::string::npos) << skipped[0].reason;
}

}  // namespace
}  // namespace quantkit::passes
