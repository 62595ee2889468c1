// The vectorized per-tensor Q/DQ loops (runtime/ops/quant_loops.h) against a scalar reference
// written the obvious way (std::nearbyint, std::min/max), bit for bit, on values that stress every
// branch: ties at k + 0.5 (even and odd k), saturation, +-Inf, NaN, magnitudes past 2^22 where the
// rounding shortcut does not apply, signed zeros and subnormals, at every length up to three
// AVX-512 vectors past a whole block (tails) and at unaligned starts.
#include "runtime/ops/quant_loops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace quantkit::runtime::quant_loops {
namespace {

// What QuantizeLinear computes (runtime/ops/quant.cc general path), one value at a time.
float ReferenceCode(float x, float scale, float zp, float lo, float hi) {
  const float v = std::nearbyint(x / scale) + zp;
  if (std::isnan(v)) return 0.0f;  // the documented NaN code
  return std::min(std::max(v, lo), hi);
}

std::vector<float> StressValues(float scale) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          -1e-40f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          3e38f,
                          -3e38f,
                          4194303.5f * scale,
                          -4194303.5f * scale,
                          4194304.0f * scale,
                          6291456.5f * scale,
                          -8388607.0f * scale,
                          1e9f * scale};
  for (int k = -300; k <= 300; ++k) v.push_back((static_cast<float>(k) + 0.5f) * scale);  // ties
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 80.0f * scale);
  for (int i = 0; i < 2000; ++i) v.push_back(normal(rng));
  return v;
}

struct Params {
  float scale, zp, lo, hi;
};

TEST(QuantLoops, QuantizeMatchesTheScalarReferenceBitForBit) {
  for (const Params p :
       {Params{0.05f, 0.0f, -128.0f, 127.0f}, Params{0.0173f, -7.0f, -128.0f, 127.0f},
        Params{0.05f, 128.0f, 0.0f, 255.0f}, Params{1.0f, 3.0f, 0.0f, 255.0f}}) {
    const std::vector<float> x = StressValues(p.scale);
    std::vector<int8_t> q8(x.size());
    std::vector<uint8_t> u8(x.size());
    if (p.lo < 0) {
      QuantizeToInt8(x.data(), q8.data(), static_cast<int64_t>(x.size()), p.scale, p.zp, p.lo,
                     p.hi);
    } else {
      QuantizeToUint8(x.data(), u8.data(), static_cast<int64_t>(x.size()), p.scale, p.zp, p.lo,
                      p.hi);
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const int expected = static_cast<int>(ReferenceCode(x[i], p.scale, p.zp, p.lo, p.hi));
      const int got = p.lo < 0 ? q8[i] : u8[i];
      ASSERT_EQ(got, expected) << "x=" << x[i] << " scale=" << p.scale << " zp=" << p.zp << " at "
                               << i;
    }
  }
}

TEST(QuantLoops, DequantizeAndFakeQuantizeComposeExactlyAtEveryLengthAndOffset) {
  const float scale = 0.0371f, zp = -3.0f;
  const std::vector<float> values = StressValues(scale);
  for (size_t offset = 0; offset < 5; ++offset) {
    for (size_t n = 0; n <= 3 * 16 + 5 && offset + n <= values.size(); ++n) {
      const float* x = values.data() + offset;
      std::vector<int8_t> q(n + 1, 99);  // one guard element past the end
      std::vector<float> r(n + 1, 42.0f), fused(n + 1, 42.0f);
      QuantizeToInt8(x, q.data(), static_cast<int64_t>(n), scale, zp, -128.0f, 127.0f);
      DequantizeInt8(q.data(), r.data(), static_cast<int64_t>(n), scale, static_cast<int32_t>(zp));
      FakeQuantize(x, fused.data(), static_cast<int64_t>(n), scale, zp, -128.0f, 127.0f);
      EXPECT_EQ(q[n], 99) << "wrote past the end, n=" << n;
      EXPECT_EQ(fused[n], 42.0f) << "wrote past the end, n=" << n;
      for (size_t i = 0; i < n; ++i) {
        const float expected = (static_cast<float>(q[i]) - zp) * scale;
        ASSERT_EQ(std::memcmp(&r[i], &expected, sizeof(float)), 0)
            << "dequantize, n=" << n << " i=" << i;
        ASSERT_EQ(std::memcmp(&fused[i], &r[i], sizeof(float)), 0)
            << "fake quantize of " << x[i] << " vs Q then DQ, n=" << n << " i=" << i;
      }
    }
  }
}

TEST(QuantLoops, FakeQuantizeMayWriteOverItsInput) {
  const float scale = 0.1f;
  std::vector<float> x = StressValues(scale), expected(x.size());
  FakeQuantize(x.data(), expected.data(), static_cast<int64_t>(x.size()), scale, 0.0f, -128.0f,
               127.0f);
  FakeQuantize(x.data(), x.data(), static_cast<int64_t>(x.size()), scale, 0.0f, -128.0f, 127.0f);
  EXPECT_EQ(std::memcmp(x.data(), expected.data(), x.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace quantkit::runtime::quant_loops
