// Pooling/conv padding semantics that ATen lacks natively: asymmetric pads, SAME_UPPER vs
// SAME_LOWER, count_include_pad with explicit padding.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "ops/single_node.h"

namespace quantkit::testing {
namespace {

using ir::DType;

ir::Tensor Row(std::vector<float> v) {
  return ir::Tensor::FromVector(DType::kFloat, {1, 1, 1, static_cast<int64_t>(v.size())}, v);
}

std::vector<ir::Attribute> PoolAttrs(std::vector<int64_t> pads, int64_t include_pad) {
  std::vector<ir::Attribute> a;
  a.push_back(ir::Attribute::Ints("kernel_shape", {1, 2}));
  a.push_back(ir::Attribute::Ints("pads", std::move(pads)));
  a.push_back(ir::Attribute::Int("count_include_pad", include_pad));
  return a;
}

TEST(AveragePool, AsymmetricPadsExcludeOrIncludePadding) {
  // x = [2, 4, 6], pad 1 at the end only: windows [2,4], [4,6], [6,pad].
  auto excl = RunSingleNode({"AveragePool", 17, {Row({2, 4, 6})}, PoolAttrs({0, 0, 0, 1}, 0)});
  ASSERT_TRUE(excl.ok()) << excl.status().ToString();
  EXPECT_EQ(Values<float>((*excl)[0]), (std::vector<float>{3, 5, 6}));
  auto incl = RunSingleNode({"AveragePool", 17, {Row({2, 4, 6})}, PoolAttrs({0, 0, 0, 1}, 1)});
  ASSERT_TRUE(incl.ok()) << incl.status().ToString();
  EXPECT_EQ(Values<float>((*incl)[0]), (std::vector<float>{3, 5, 3}));
}

TEST(MaxPool, SameUpperAndSameLowerPutTheExtraPadOnOppositeSides) {
  // Kernel 2, stride 1, input 3 -> total pad 1: SAME_UPPER pads the end, SAME_LOWER the start.
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    std::vector<ir::Attribute> a;
    a.push_back(ir::Attribute::Ints("kernel_shape", {1, 2}));
    a.push_back(ir::Attribute::String("auto_pad", mode));
    auto out = RunSingleNode({"MaxPool", 12, {Row({1, 3, 2})}, std::move(a)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> want = std::string(mode) == "SAME_UPPER" ? std::vector<float>{3, 3, 2}
                                                                      : std::vector<float>{1, 3, 3};
    EXPECT_EQ(Values<float>((*out)[0]), want) << mode;
  }
}

}  // namespace
}  // namespace quantkit::testing

namespace quantkit::testing {
namespace {

// Y alone takes oneDNN's pooling (inference fast path); asking for Indices too keeps ATen's
// kernel. Same values bit for bit, and NaN propagates like ATen's (the fast path steps aside).
TEST(MaxPool, OneDnnPathMatchesAtenPathIncludingNaN) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Case {
    std::vector<int64_t> kernel, strides, pads;
    int64_t ceil;
  };
  for (const Case& c :
       {Case{{3, 3}, {2, 2}, {1, 1, 1, 1}, 0}, Case{{2, 2}, {2, 2}, {0, 0, 0, 0}, 0},
        Case{{3, 3}, {2, 2}, {0, 0, 0, 0}, 1}, Case{{3, 3}, {1, 1}, {0, 1, 2, 1}, 0}}) {
    for (bool with_nan : {false, true}) {
      std::vector<float> x(2 * 5 * 13 * 11);
      for (float& v : x) v = normal(rng);
      if (with_nan) x[17] = x[400] = std::numeric_limits<float>::quiet_NaN();
      auto attrs = [&] {
        std::vector<ir::Attribute> a;
        a.push_back(ir::Attribute::Ints("kernel_shape", c.kernel));
        a.push_back(ir::Attribute::Ints("strides", c.strides));
        a.push_back(ir::Attribute::Ints("pads", c.pads));
        a.push_back(ir::Attribute::Int("ceil_mode", c.ceil));
        return a;
      };
      const ir::Tensor input = ir::Tensor::FromVector(DType::kFloat, {2, 5, 13, 11}, x);
      auto fast = RunSingleNode({"MaxPool", 12, {input}, attrs()});
      auto aten = RunSingleNode({"MaxPool", 12, {input}, attrs(), 2});
      ASSERT_TRUE(fast.ok() && aten.ok());
      ASSERT_EQ((*fast)[0].dims(), (*aten)[0].dims());
      ASSERT_EQ((*fast)[0].nbytes(), (*aten)[0].nbytes());
      EXPECT_EQ(std::memcmp((*fast)[0].data(), (*aten)[0].data(), (*fast)[0].nbytes()), 0)
          << "kernel " << c.kernel[0] << " ceil " << c.ceil << " nan " << with_nan;
    }
  }
}

}  // namespace
}  // namespace quantkit::testing
