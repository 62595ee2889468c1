// Every quantize path rounds x / scale the way ONNX QuantizeLinear and onnxruntime do: the
// division in float32, then round half to even on the float32 quotient (issue 20 item 10).
//
// The table holds near-ties where that matters: float32(x / s) is exactly k + 0.5, while the exact
// quotient (what a float64 division gives) lies just below or above it, so float64 division rounds
// the other way. Each row's expected value was checked against onnxruntime 1.19.2's
// QuantizeLinear (per tensor and per axis, int8). The paths compared:
//   - the runtime's QuantizeLinear kernel: fused per-tensor path (int8, uint8) and the general
//     ATen path (per-axis scales);
//   - quant::QuantizeValue (weights, FoldWeightQdq in simulation, layer analysis);
//   - FakeQuantize (QAT training graphs), per tensor and per channel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/single_node.h"
#include "quant/params.h"
#include "runtime/training_ops.h"

namespace quantkit::runtime {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

struct TieCase {
  uint32_t x_bits, scale_bits;
  int32_t expected;  // round_half_to_even(float32(x / scale)), as onnxruntime
};

// Found by search (python, numpy float32); "exact" is the float64 quotient.
constexpr TieCase kTies[] = {
    {0x40dcbb87, 0x3dbb1c6c, 76},   // float32 75.5 -> 76;   exact 75.4999979 -> 75
    {0x40dbce14, 0x3d7a16d8, 112},  // float32 112.5 -> 112; exact 112.5000012 -> 113
    {0x4042b775, 0x3d6089c1, 56},   // float32 55.5 -> 56;   exact 55.4999984 -> 55
    {0x3dc48b5a, 0x3aa69b6d, 76},   // float32 75.5 -> 76;   exact 75.4999966 -> 75
    {0xbd901cd3, 0x3b79469d, -18},  // float32 -18.5 -> -18; exact -18.5000005 -> -19
    {0x403a3f0d, 0x3d85ee0f, 44},   // float32 44.5 -> 44;   exact 44.5000005 -> 45
};

// The table is discriminating: float64 division gives another integer on every row, so a path
// that divided in double would fail below.
TEST(QuantizeTies, TableRowsSeparateFloatFromDoubleDivision) {
  for (const TieCase& c : kTies) {
    const double exact =
        static_cast<double>(FromBits(c.x_bits)) / static_cast<double>(FromBits(c.scale_bits));
    EXPECT_NE(static_cast<int32_t>(std::nearbyint(exact)), c.expected) << std::hex << c.x_bits;
  }
}

TEST(QuantizeTies, QuantizeValueDividesInFloat) {
  for (const TieCase& c : kTies) {
    EXPECT_EQ(quant::QuantizeValue(FromBits(c.x_bits), FromBits(c.scale_bits), 0,
                                   quant::QuantRange{-128, 127}),
              c.expected)
        << std::hex << c.x_bits;
  }
}

ir::Tensor Scalar(ir::DType t, float v) {
  if (t == ir::DType::kUint8)
    return ir::Tensor::FromVector(t, {}, std::vector<uint8_t>{static_cast<uint8_t>(v)});
  if (t == ir::DType::kInt8)
    return ir::Tensor::FromVector(t, {}, std::vector<int8_t>{static_cast<int8_t>(v)});
  return ir::Tensor::FromVector(t, {}, std::vector<float>{v});
}

TEST(QuantizeTies, QuantizeLinearKernelPathsDivideInFloat) {
  for (const TieCase& c : kTies) {
    const float x = FromBits(c.x_bits), s = FromBits(c.scale_bits);
    // Fused per-tensor path, int8 and uint8 (zero point 128).
    auto i8 = testing::RunSingleNode(
        {"QuantizeLinear",
         13,
         {ir::Tensor::FromVector(ir::DType::kFloat, {3}, std::vector<float>(3, x)),
          Scalar(ir::DType::kFloat, s), Scalar(ir::DType::kInt8, 0)}});
    ASSERT_TRUE(i8.ok()) << i8.status().ToString();
    EXPECT_EQ(testing::Values<int8_t>((*i8)[0]),
              std::vector<int8_t>(3, static_cast<int8_t>(c.expected)));
    auto u8 = testing::RunSingleNode(
        {"QuantizeLinear",
         13,
         {ir::Tensor::FromVector(ir::DType::kFloat, {3}, std::vector<float>(3, x)),
          Scalar(ir::DType::kFloat, s), Scalar(ir::DType::kUint8, 128)}});
    ASSERT_TRUE(u8.ok()) << u8.status().ToString();
    EXPECT_EQ(testing::Values<uint8_t>((*u8)[0]),
              std::vector<uint8_t>(3, static_cast<uint8_t>(c.expected + 128)));
    // General ATen path: per-axis scales along axis 1.
    std::vector<ir::Attribute> attrs;
    attrs.push_back(ir::Attribute::Int("axis", 1));
    auto axis = testing::RunSingleNode(
        {"QuantizeLinear",
         13,
         {ir::Tensor::FromVector(ir::DType::kFloat, {1, 2}, std::vector<float>(2, x)),
          ir::Tensor::FromVector(ir::DType::kFloat, {2}, std::vector<float>(2, s)),
          ir::Tensor::FromVector(ir::DType::kInt8, {2}, std::vector<int8_t>(2, 0))},
         std::move(attrs)});
    ASSERT_TRUE(axis.ok()) << axis.status().ToString();
    EXPECT_EQ(testing::Values<int8_t>((*axis)[0]),
              std::vector<int8_t>(2, static_cast<int8_t>(c.expected)));
  }
}

TEST(QuantizeTies, FakeQuantizeDividesInFloat) {
  for (const TieCase& c : kTies) {
    const float x = FromBits(c.x_bits), s = FromBits(c.scale_bits);
    const float expected = quant::Dequantize(c.expected, s, 0);  // what Q -> DQ returns
    at::Tensor per_tensor = FakeQuantizeSymmetricInt8(at::full({4}, x), at::tensor(s), -1, false);
    EXPECT_EQ(per_tensor[0].item<float>(), expected) << std::hex << c.x_bits;
    at::Tensor per_channel =
        FakeQuantizeSymmetricInt8(at::full({2, 3}, x), at::full({2}, s), 0, false);
    EXPECT_EQ(per_channel[1][2].item<float>(), expected) << std::hex << c.x_bits;
  }
}

}  // namespace
}  // namespace quantkit::runtime
