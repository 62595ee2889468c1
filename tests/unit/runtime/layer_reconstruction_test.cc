// AdaRound, SeqMSE and bias correction (runtime/layer_reconstruction.h) on one Gemm where the
// answer is known by hand or by enumerating every choice.
#include "runtime/layer_reconstruction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace quantkit::runtime {
namespace {

// y = x W^T (+ b) (Gemm, transB = 1): W [out, in] as an initializer "W", x [batch, in] the graph
// input; with `b`, the bias "B" (`out` values, or fewer that broadcast).
std::shared_ptr<const ir::Model> GemmBiasBlock(const std::vector<float>& w,
                                               const std::vector<float>& b, int64_t out,
                                               int64_t in) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Known(in)});
  g.AddInput(x);
  std::vector<ir::Value*> inputs = {
      x, g.AddInitializer("W", ir::Tensor::FromVector(ir::DType::kFloat, {out, in}, w))};
  if (!b.empty()) {
    inputs.push_back(g.AddInitializer(
        "B", ir::Tensor::FromVector(ir::DType::kFloat, {static_cast<int64_t>(b.size())}, b)));
  }
  auto node = g.AddNode("Gemm", inputs, {"y"}, "", "gemm");
  EXPECT_TRUE(node.ok());
  (*node)->SetAttr(ir::Attribute::Int("transB", 1));
  g.AddOutput((*node)->output(0));
  return std::make_shared<const ir::Model>(std::move(m));
}

std::shared_ptr<const ir::Model> GemmBlock(const std::vector<float>& w, int64_t out, int64_t in) {
  return GemmBiasBlock(w, {}, out, in);
}

std::vector<ir::Tensor> Batches(const std::vector<std::vector<float>>& rows, int64_t in,
                                int64_t per_batch) {
  std::vector<ir::Tensor> out;
  for (size_t s = 0; s < rows.size(); s += static_cast<size_t>(per_batch)) {
    std::vector<float> v;
    int64_t n = 0;
    for (size_t r = s; r < std::min(rows.size(), s + static_cast<size_t>(per_batch)); ++r, ++n) {
      v.insert(v.end(), rows[r].begin(), rows[r].end());
    }
    out.push_back(ir::Tensor::FromVector(ir::DType::kFloat, {n, in}, v));
  }
  return out;
}

// The FP32 outputs x W^T of one output channel, batch by batch.
std::vector<ir::Tensor> Targets(const std::vector<std::vector<float>>& rows,
                                const std::vector<float>& w, int64_t per_batch) {
  std::vector<std::vector<float>> ys;
  for (const auto& r : rows) {
    double y = 0;
    for (size_t i = 0; i < r.size(); ++i) y += static_cast<double>(r[i]) * w[i];
    ys.push_back({static_cast<float>(y)});
  }
  return Batches(ys, 1, per_batch);
}

TEST(AdaRound, FindsTheRoundingTheSumOfTheRestsProvesBest) {
  // 16 weights on the grid s = 0.5 whose fractional parts (in steps) are r_i = 0.075 + 0.04 i, and
  // an input that feeds them all the same value c: the output error is c * sum(q_i - w_i / s) * s,
  // so a rounding is optimal exactly when the number of weights rounded up equals sum(r_i) = 6
  // (error 0). Round to nearest takes the five r_i > 0.5 up: error -s c.
  const int64_t k = 16;
  const float s = 0.5f;
  std::vector<float> w(k);
  double rests = 0;
  for (int64_t i = 0; i < k; ++i) {
    const float r = 0.075f + 0.04f * static_cast<float>(i);
    rests += r;
    w[static_cast<size_t>(i)] =
        (static_cast<float>(i % 3) - 1.0f) * 3.0f * s + r * s;  // floors -3, 0, 3 steps
  }
  ASSERT_NEAR(rests, 6.0, 1e-5);
  std::mt19937 rng(7);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  for (int j = 0; j < 256; ++j)
    rows.push_back(std::vector<float>(static_cast<size_t>(k), n01(rng)));
  LayerBlock block;
  block.model = GemmBlock(w, 1, k);
  block.input = "x";
  block.weight = "W";
  block.scale = {s};
  block.output_channel_dim = -1;
  const std::vector<ir::Tensor> xs = Batches(rows, k, 32), ys = Targets(rows, w, 32);
  AdaRoundParams p;
  p.iterations = 2000;
  p.seed = 3;
  auto o = AdaRoundLayer(block, xs, ys, p);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->weight.numel(), k);
  const float* got = o->weight.data_as<float>();
  int up = 0;
  for (int64_t i = 0; i < k; ++i) {
    const float q = got[i] / s, floor = std::floor(w[static_cast<size_t>(i)] / s);
    ASSERT_TRUE(q == floor || q == floor + 1)
        << "weight " << i << " left its two grid points: " << q;
    up += q == floor + 1;
  }
  EXPECT_EQ(up, 6) << "the optimum rounds exactly sum(r_i) = 6 weights up; nearest rounds 5";
  EXPECT_FALSE(o->kept_nearest);
  EXPECT_LT(o->loss_adaround, 1e-3 * o->loss_nearest);
  EXPECT_EQ(o->changed, 1);
  // Deterministic for a seed: the same bytes again.
  auto again = AdaRoundLayer(block, xs, ys, p);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->weight.ContentEquals(o->weight));
  EXPECT_EQ(again->loss_adaround, o->loss_adaround);
}

TEST(AdaRound, KeepsNearestWhenItIsAlreadyBest) {
  // Weights exactly on the grid: nothing to learn, the result is the weights themselves.
  const std::vector<float> w = {1.0f, -2.0f, 3.0f};
  std::vector<std::vector<float>> rows;
  for (int s = 0; s < 32; ++s) rows.push_back({0.1f * s, 1.0f - 0.05f * s, 0.3f});
  LayerBlock block;
  block.model = GemmBlock(w, 1, 3);
  block.input = "x";
  block.weight = "W";
  block.scale = {0.5f};
  block.output_channel_dim = -1;
  AdaRoundParams p;
  p.iterations = 50;
  auto o = AdaRoundLayer(block, Batches(rows, 3, 16), Targets(rows, w, 16), p);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->kept_nearest);
  EXPECT_EQ(o->changed, 0);
  const float* got = o->weight.data_as<float>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], w[static_cast<size_t>(i)]);
}

TEST(SeqMse, ClipsTheOutlierAnInputNeverReadsAndKeepsTheRangeThatMatters) {
  // Channel 0: an outlier weight 10 whose input is always 0, and small weights that matter: the
  // best clip is the smallest candidate (10 * 1/20 = 0.5: the small weights get a 20x finer grid,
  // the outlier's clipping costs nothing). Channel 1: its largest weight carries signal, so any
  // clip below max|w| costs more than the finer grid gains: the candidate k = K (amax 1.0).
  const int64_t in = 8;
  std::vector<float> w(2 * in);
  w[0] = 10.0f;  // channel 0's outlier, read by input 0, which is always 0
  for (int64_t i = 1; i < in; ++i)
    w[static_cast<size_t>(i)] = 0.013f * static_cast<float>(i) - 0.05f;
  w[static_cast<size_t>(in)] = 0.2f;      // channel 1 reads input 0 too: no signal either way
  w[static_cast<size_t>(in + 1)] = 1.0f;  // channel 1's largest weight, on a live input
  for (int64_t i = 2; i < in; ++i)
    w[static_cast<size_t>(in + i)] = 0.3f - 0.07f * static_cast<float>(i);
  std::mt19937 rng(11);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<std::vector<float>> rows;
  for (int s = 0; s < 64; ++s) {
    std::vector<float> r(static_cast<size_t>(in));
    for (int64_t i = 1; i < in; ++i) r[static_cast<size_t>(i)] = n01(rng);
    rows.push_back(r);  // r[0] == 0
  }
  LayerBlock block;
  block.model = GemmBlock(w, 2, in);
  block.input = "x";
  block.weight = "W";
  block.scale = {10.0f / 127.0f, 1.0f / 127.0f};
  block.axis = 0;
  block.output_channel_dim = -1;
  auto o = SeqMseLayer(block, {10.0f, 1.0f}, Batches(rows, in, 16), {20});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->amax.size(), 2u);
  EXPECT_FLOAT_EQ(o->amax[0], 0.5f);
  EXPECT_FLOAT_EQ(o->amax[1], 1.0f);
  EXPECT_EQ(o->clipped_channels, 1);
  EXPECT_LT(o->loss_after, o->loss_before);
  // The weights come back on the chosen grid: the outlier clipped to 0.5, channel 1 unchanged grid.
  const float* q = o->weight.data_as<float>();
  EXPECT_FLOAT_EQ(q[0], 0.5f);
  for (int64_t i = 0; i < 2 * in; ++i) {
    const float s = (i < in ? 0.5f : 1.0f) / 127.0f;
    const float k = q[i] / s;
    EXPECT_NEAR(k, std::nearbyint(k), 1e-3) << "weight " << i << " is not on its channel's grid";
  }
}

TEST(BiasCorrection, AddsTheMeanShiftTheQuantizedWeightsAndInputsCauseByHand) {
  // Two output channels on the grid s = 0.5 (per channel: 0.5 and 0.25). Every weight sits 0.3 of a
  // step above a grid point, so nearest rounding takes 0.3 s off each: the quantized output of a
  // channel is lower by 0.3 s * sum(x) on the same input. The quantized-prefix inputs are the FP32
  // ones plus 0.1 on input 0. So the shift per channel is, in closed form over the samples,
  //   mean(x . w) - mean(x' . q(w)),   computed below in double, and the bias grows by it.
  const int64_t in = 4, out = 2;
  const std::vector<float> scale = {0.5f, 0.25f};
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t c = 0; c < out; ++c) {
    for (int64_t i = 0; i < in; ++i) {
      w[static_cast<size_t>(c * in + i)] =
          (static_cast<float>(i) - 1.0f + 0.3f) * scale[static_cast<size_t>(c)];
    }
  }
  const std::vector<float> bias = {0.25f, -1.0f};
  std::mt19937 rng(5);
  std::normal_distribution<float> n01(1.0f, 1.0f);
  std::vector<std::vector<float>> rows, shifted;
  for (int j = 0; j < 96; ++j) {
    std::vector<float> r(static_cast<size_t>(in));
    for (float& v : r) v = n01(rng);
    rows.push_back(r);
    r[0] += 0.1f;
    shifted.push_back(r);
  }
  std::vector<double> expect(static_cast<size_t>(out), 0.0);
  for (int64_t c = 0; c < out; ++c) {
    const double s = scale[static_cast<size_t>(c)];
    for (size_t j = 0; j < rows.size(); ++j) {
      for (int64_t i = 0; i < in; ++i) {
        const double wi = w[static_cast<size_t>(c * in + i)];
        const double qi = std::nearbyint(wi / s) * s;
        expect[static_cast<size_t>(c)] +=
            rows[j][static_cast<size_t>(i)] * wi - shifted[j][static_cast<size_t>(i)] * qi;
      }
    }
    expect[static_cast<size_t>(c)] /= static_cast<double>(rows.size());
  }
  LayerBlock block;
  block.model = GemmBiasBlock(w, bias, out, in);
  block.input = "x";
  block.weight = "W";
  block.scale = scale;
  block.axis = 0;
  block.output_channel_dim = -1;
  auto o = BiasCorrectionLayer(block, "B", Batches(rows, in, 32), Batches(shifted, in, 32));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->shift.size(), 2u);
  ASSERT_EQ(o->bias.numel(), 2);
  constexpr double kShiftTolerance = 1e-5;  // float32 layer outputs summed in double
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(o->shift[c], expect[c], kShiftTolerance * (1 + std::fabs(expect[c])))
        << "channel " << c;
    EXPECT_NEAR(o->bias.data_as<float>()[c], bias[c] + expect[c],
                kShiftTolerance * (1 + std::fabs(expect[c])));
  }
  EXPECT_GT(std::fabs(expect[0]), 0.1) << "the case must have a shift worth correcting";
  // The mean part of the error is gone; what is left is the variance part only.
  EXPECT_LT(o->error_after, o->error_before);

  // A previous stage's weight already on the grid quantizes to itself: with the FP32 weights given
  // as that weight and the same inputs on both sides, there is nothing to correct.
  std::vector<float> on_grid(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const float s = scale[i / static_cast<size_t>(in)];
    on_grid[i] = std::nearbyint(w[i] / s) * s;
  }
  LayerBlock grid_block = block;
  grid_block.model = GemmBiasBlock(on_grid, bias, out, in);
  const ir::Tensor given = ir::Tensor::FromVector(ir::DType::kFloat, {out, in}, on_grid);
  auto none =
      BiasCorrectionLayer(grid_block, "B", Batches(rows, in, 32), Batches(rows, in, 32), &given);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  for (float v : none->shift) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(none->error_before, 0.0);
}

TEST(BiasCorrection, ABiasOfAnotherLengthIsRefused) {
  LayerBlock block;
  // One bias value broadcast over 2 output channels: no per-channel bias to move.
  block.model = GemmBiasBlock({1, 2, 3, 4, 5, 6, 7, 8}, {0}, 2, 4);
  block.input = "x";
  block.weight = "W";
  block.scale = {0.5f};
  block.output_channel_dim = -1;
  const std::vector<ir::Tensor> xs = Batches({{1, 2, 3, 4}}, 4, 1);
  EXPECT_FALSE(BiasCorrectionLayer(block, "B", xs, xs).ok());
  EXPECT_FALSE(BiasCorrectionLayer(block, "missing", xs, xs).ok());
}

}  // namespace
}  // namespace quantkit::runtime
