// QuantizeLinear / DequantizeLinear literal tables: .5 ties round to even, saturation at the
// type's range, per-tensor / per-axis / blocked scales, int8 / uint8 / int16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/single_node.h"

namespace quantkit::testing {
namespace {

using ir::DType;

ir::Tensor F(std::vector<int64_t> dims, std::vector<float> v) {
  return ir::Tensor::FromVector(DType::kFloat, dims, v);
}

TEST(QuantizeLinear, TiesRoundToEvenAndSaturateUint8) {
  // x / 1 + 0: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0 (clamped), 300 -> 255, -7 -> 0.
  auto out = RunSingleNode({"QuantizeLinear",
                            13,
                            {F({6}, {0.5f, 1.5f, 2.5f, -0.5f, 300.f, -7.f}), F({}, {1.f}),
                             ir::Tensor::FromVector(DType::kUint8, {}, std::vector<uint8_t>{0})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 2, 2, 0, 255, 0}));
}

TEST(QuantizeLinear, Int8WithZeroPointAndNegativeTies) {
  // x / 2 + 1: -3/2 = -1.5 -> -2 (+1 = -1); -5/2 = -2.5 -> -2 (+1 = -1); 1000 -> 127; -1000 ->
  // -128.
  auto out = RunSingleNode({"QuantizeLinear",
                            13,
                            {F({4}, {-3.f, -5.f, 1000.f, -1000.f}), F({}, {2.f}),
                             ir::Tensor::FromVector(DType::kInt8, {}, std::vector<int8_t>{1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{-1, -1, 127, -128}));
}

TEST(QuantizeLinear, PerAxisScalesAlongAxis1) {
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::Int("axis", 1));
  auto out = RunSingleNode({"QuantizeLinear",
                            13,
                            {F({2, 2}, {1.f, 1.f, 4.f, 4.f}), F({2}, {1.f, 4.f}),
                             ir::Tensor::FromVector(DType::kInt8, {2}, std::vector<int8_t>{0, 10})},
                            std::move(attrs)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{1, 10, 4, 11}));
}

TEST(QuantizeLinear, BlockedScalesOpset21Int16) {
  // Blocks of 2 along axis 0: scales [1, 10] cover rows {0,1} and {2} (partial last block).
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::Int("axis", 0));
  attrs.push_back(ir::Attribute::Int("block_size", 2));
  auto out =
      RunSingleNode({"QuantizeLinear",
                     21,
                     {F({3, 1}, {5.f, 6.f, 70.f}), F({2, 1}, {1.f, 10.f}),
                      ir::Tensor::FromVector(DType::kInt16, {2, 1}, std::vector<int16_t>{0, 0})},
                     std::move(attrs)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int16_t>((*out)[0]), (std::vector<int16_t>{5, 6, 7}));
}

TEST(DequantizeLinear, PerTensorAndPerAxis) {
  auto out = RunSingleNode(
      {"DequantizeLinear",
       13,
       {ir::Tensor::FromVector(DType::kUint8, {3}, std::vector<uint8_t>{0, 128, 255}),
        F({}, {0.5f}), ir::Tensor::FromVector(DType::kUint8, {}, std::vector<uint8_t>{128})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-64.f, 0.f, 63.5f}));
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::Int("axis", 0));
  auto axis =
      RunSingleNode({"DequantizeLinear",
                     13,
                     {ir::Tensor::FromVector(DType::kInt8, {2, 1}, std::vector<int8_t>{-4, 4}),
                      F({2}, {1.f, 0.25f})},
                     std::move(attrs)});
  ASSERT_TRUE(axis.ok()) << axis.status().ToString();
  EXPECT_EQ(Values<float>((*axis)[0]), (std::vector<float>{-4.f, 1.f}));
}

// The per-tensor kernels are a fused single pass; the per-axis path is the general ATen
// composition. With every channel's scale and zero point equal, both must agree bit for bit,
// ties, saturation and tiny/huge quotients included.
TEST(QuantizeLinear, PerTensorFastPathIsBitIdenticalToThePerAxisPath) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  const float scale = 0.37f;
  const int64_t channels = 3, per_channel = 70001;  // > one parallel grain per channel
  std::vector<float> x(static_cast<size_t>(channels * per_channel));
  for (size_t i = 0; i < x.size(); ++i) {
    switch (i % 7) {
      case 0:
        x[i] = (static_cast<float>(static_cast<int>(rng() % 400) - 200) + 0.5f) * scale;
        break;  // near ties
      case 1:
        x[i] = std::ldexp(normal(rng), static_cast<int>(rng() % 60) - 30);
        break;
      case 2:
        x[i] = -0.0f;
        break;
      default:
        x[i] = normal(rng);
    }
  }
  for (DType qt : {DType::kInt8, DType::kUint8}) {
    const int zp = qt == DType::kInt8 ? -3 : 120;
    auto zp_tensor = [&](std::vector<int64_t> dims, size_t n) {
      return qt == DType::kInt8
                 ? ir::Tensor::FromVector(qt, dims, std::vector<int8_t>(n, static_cast<int8_t>(zp)))
                 : ir::Tensor::FromVector(qt, dims,
                                          std::vector<uint8_t>(n, static_cast<uint8_t>(zp)));
    };
    auto fast = RunSingleNode(
        {"QuantizeLinear", 13, {F({channels, per_channel}, x), F({}, {scale}), zp_tensor({}, 1)}});
    std::vector<ir::Attribute> attrs;
    attrs.push_back(ir::Attribute::Int("axis", 0));
    auto general = RunSingleNode(
        {"QuantizeLinear",
         13,
         {F({channels, per_channel}, x), F({channels}, std::vector<float>(channels, scale)),
          zp_tensor({channels}, channels)},
         std::move(attrs)});
    ASSERT_TRUE(fast.ok() && general.ok());
    ASSERT_EQ((*fast)[0].nbytes(), (*general)[0].nbytes());
    EXPECT_EQ(std::memcmp((*fast)[0].data(), (*general)[0].data(), (*fast)[0].nbytes()), 0)
        << ir::DTypeName(qt);

    auto dq_fast =
        RunSingleNode({"DequantizeLinear", 13, {(*fast)[0], F({}, {scale}), zp_tensor({}, 1)}});
    std::vector<ir::Attribute> dq_attrs;
    dq_attrs.push_back(ir::Attribute::Int("axis", 0));
    auto dq_general =
        RunSingleNode({"DequantizeLinear",
                       13,
                       {(*fast)[0], F({channels}, std::vector<float>(channels, scale)),
                        zp_tensor({channels}, channels)},
                       std::move(dq_attrs)});
    ASSERT_TRUE(dq_fast.ok() && dq_general.ok());
    EXPECT_EQ(Values<float>((*dq_fast)[0]), Values<float>((*dq_general)[0])) << ir::DTypeName(qt);
  }
}

TEST(QuantizeLinear, PerAxisScaleOfWrongLengthNamesTheNode) {
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::Int("axis", 1));
  auto out = RunSingleNode(
      {"QuantizeLinear", 13, {F({2, 2}, {1, 2, 3, 4}), F({3}, {1, 1, 1})}, std::move(attrs)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node 'node0' (QuantizeLinear, opset 13)"),
            std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace quantkit::testing
