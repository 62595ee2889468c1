// Quantization parameter math: hand-computed tables (ties, saturation, degenerate ranges) and
// the TensorRT cache hex encoding (cache_lines.json).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/params.h"
#include "tv_support.h"

namespace quantkit::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using ir::DType;

TEST(Params, RangeForIntegerTypes) {
  EXPECT_EQ(RangeFor(DType::kInt8)->min, -128);
  EXPECT_EQ(RangeFor(DType::kInt8)->max, 127);
  EXPECT_EQ(RangeFor(DType::kUint8)->max, 255);
  EXPECT_EQ(RangeFor(DType::kInt4)->min, -8);
  EXPECT_EQ(NarrowRangeFor(DType::kInt8)->min, -127);
  EXPECT_EQ(NarrowRangeFor(DType::kUint8)->min, 0);
  EXPECT_FALSE(RangeFor(DType::kFloat).ok());
}

TEST(Params, QuantizeRoundsHalfToEvenAndSaturates) {
  const QuantRange i8{-128, 127}, u8{0, 255};
  struct Row {
    float x, scale;
    int32_t zp;
    QuantRange r;
    int32_t q;
  };
  const Row rows[] = {
      {0.5f, 1, 0, i8, 0},      {1.5f, 1, 0, i8, 2},       {2.5f, 1, 0, i8, 2},
      {-0.5f, 1, 0, i8, 0},     {-1.5f, 1, 0, i8, -2},     {-2.5f, 1, 0, i8, -2},
      {3.0f, 2, 0, i8, 2},      {5.0f, 2, 0, i8, 2},       {7.0f, 2, 0, i8, 4},
      {127.5f, 1, 0, i8, 127},  {-128.5f, 1, 0, i8, -128}, {1e30f, 1, 0, i8, 127},
      {-1e30f, 1, 0, i8, -128}, {kInf, 1, 0, i8, 127},     {-kInf, 1, 0, i8, -128},
      {kNaN, 1, 3, i8, 3},      {0.5f, 1, 128, u8, 128},   {1.5f, 1, 128, u8, 130},
      {-200.f, 1, 128, u8, 0},  {200.f, 1, 128, u8, 255},  {0.1f, 0.1f, 0, i8, 1},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(QuantizeValue(r.x, r.scale, r.zp, r.r), r.q)
        << r.x << " / " << r.scale << " + " << r.zp;
  }
  EXPECT_EQ(Dequantize(130, 0.5f, 128), 1.0f);
  EXPECT_EQ(Dequantize(-127, 2.0f, 0), -254.0f);
}

TEST(Params, SymmetricInt8IsAmaxOver127) {
  EXPECT_EQ(SymmetricInt8Params(127.0f).scale, 1.0f);
  EXPECT_EQ(SymmetricInt8Params(1.0f).scale, 1.0f / 127.0f);
  EXPECT_EQ(SymmetricInt8Params(1.0f).zero_point, 0);
  EXPECT_EQ(SymmetricInt8Params(1.0f).diagnostic, ScaleDiagnostic::kOk);
}

TEST(Params, DegenerateRangesGiveDefinedFiniteScales) {
  struct Row {
    float amax;
    float scale;
    ScaleDiagnostic d;
  };
  const Row rows[] = {
      {0.0f, 1.0f, ScaleDiagnostic::kZeroRange},
      {kNaN, 1.0f, ScaleDiagnostic::kNaNRange},
      {kInf, std::numeric_limits<float>::max() / 127.0f, ScaleDiagnostic::kInfiniteRange},
      {std::numeric_limits<float>::denorm_min(), 1.0f, ScaleDiagnostic::kTinyScale},
      {1e-37f, 1.0f, ScaleDiagnostic::kTinyScale},  // 1e-37/127 < FLT_MIN
      {-2.0f, 2.0f / 127.0f, ScaleDiagnostic::kNegativeAmax},
  };
  for (const Row& r : rows) {
    const QuantParams p = SymmetricInt8Params(r.amax);
    EXPECT_EQ(p.scale, r.scale) << r.amax;
    EXPECT_EQ(p.diagnostic, r.d) << r.amax;
    EXPECT_TRUE(std::isfinite(p.scale) && p.scale >= std::numeric_limits<float>::min());
    EXPECT_NE(std::string(ScaleDiagnosticName(p.diagnostic)), "unknown");
  }
}

TEST(Params, OnnxRuntimeAsymmetricUint8) {
  // rmin -1, rmax 1: scale = 2/255, zp = round(0 + 1 / (2/255)) = round(127.5) = 128 (half even).
  auto p = ComputeScaleZeroPoint(-1.0f, 1.0f, DType::kUint8, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scale, static_cast<float>(2.0 / 255.0));
  EXPECT_EQ(p->zero_point, 128);
  // Range widened to include 0: [2, 5] -> [0, 5], zp 0.
  p = ComputeScaleZeroPoint(2.0f, 5.0f, DType::kUint8, false);
  EXPECT_EQ(p->scale, static_cast<float>(5.0 / 255.0));
  EXPECT_EQ(p->zero_point, 0);
  // [-3, 0]: zp = round(0 + 3 / (3/255)) = 255.
  p = ComputeScaleZeroPoint(-3.0f, 0.0f, DType::kUint8, false);
  EXPECT_EQ(p->zero_point, 255);
  // [-0.5, 0.5] zp = round(127.5) = 128; [-0.25, 0.75]: round(63.75) = 64.
  p = ComputeScaleZeroPoint(-0.25f, 0.75f, DType::kUint8, false);
  EXPECT_EQ(p->zero_point, 64);
  // Symmetric int8: (2·absmax)/254 == amax/127, zp 0; symmetric uint8 zp = round(127.5) = 128.
  p = ComputeScaleZeroPoint(-3.0f, 10.0f, DType::kInt8, true);
  EXPECT_EQ(p->scale, 10.0f / 127.0f);
  EXPECT_EQ(p->zero_point, 0);
  p = ComputeScaleZeroPoint(-3.0f, 10.0f, DType::kUint8, true);
  EXPECT_EQ(p->zero_point, 128);
  // Degenerate.
  p = ComputeScaleZeroPoint(0.0f, 0.0f, DType::kUint8, false);
  EXPECT_EQ(p->scale, 1.0f);
  EXPECT_EQ(p->diagnostic, ScaleDiagnostic::kZeroRange);
  p = ComputeScaleZeroPoint(kNaN, 1.0f, DType::kUint8, false);
  EXPECT_EQ(p->diagnostic, ScaleDiagnostic::kNaNRange);
  p = ComputeScaleZeroPoint(-kInf, kInf, DType::kUint8, false);
  EXPECT_TRUE(std::isfinite(p->scale));
  EXPECT_EQ(p->diagnostic, ScaleDiagnostic::kInfiniteRange);
  EXPECT_FALSE(ComputeScaleZeroPoint(1.0f, -1.0f, DType::kUint8, false).ok());
  EXPECT_FALSE(ComputeScaleZeroPoint(0.0f, 1.0f, DType::kFloat, false).ok());
}

TEST(TrtCacheHex, EncodesAndDecodesTheCacheLineExamples) {
  const std::string dir = tv::Dir();
  ASSERT_FALSE(dir.empty());
  const nlohmann::json j = testing::LoadJson(dir + "/cache_lines.json");
  ASSERT_FALSE(j.is_discarded());
  int n = 0;
  for (const auto& e : j.at("encode")) {
    const float amax = testing::FloatFromHex(e.at("amax_f32_hex").get<std::string>());
    EXPECT_EQ(EncodeTrtScaleHex(amax), e.at("hex_%08x").get<std::string>()) << amax;
    auto back = DecodeTrtScaleHex(e.at("hex_%x").get<std::string>());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, amax / 127.0f);
    ++n;
  }
  for (const auto& d : j.at("decode")) {
    auto s = DecodeTrtScaleHex(d.at("hex").get<std::string>());
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(static_cast<double>(*s), d.at("scale").get<double>());
    ++n;
  }
  EXPECT_GE(n, 10);
  EXPECT_FALSE(DecodeTrtScaleHex("").ok());
  EXPECT_FALSE(DecodeTrtScaleHex("123456789").ok());
  EXPECT_FALSE(DecodeTrtScaleHex("0x12").ok());
}

}  // namespace
}  // namespace quantkit::quant
