// runtime/ops/float_gemm.h: MatMul / Gemm products through oneDNN's sgemm agree with a float64
// reference on every layout the ONNX ops produce (plain, transposed views, [..., K] x [K, N],
// batched, broadcast and 1-D fallbacks), are deterministic, and keep autograd working.
#include "runtime/ops/float_gemm.h"

#include <gtest/gtest.h>

#include <vector>

namespace quantkit::runtime {
namespace {

// float32 products of O(K) terms of O(1) values: relative to the float64 result's scale.
constexpr double kGemmRtol = 1e-5;

at::Tensor Random(std::vector<int64_t> shape, int64_t seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::kFloat);
}

void ExpectCloseToReference(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ref = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
  ASSERT_EQ(got.sizes(), ref.sizes());
  ASSERT_EQ(got.scalar_type(), at::kFloat);
  const double scale = ref.abs().max().item<double>() + 1.0;
  EXPECT_LT((got.to(at::kDouble) - ref).abs().max().item<double>(), kGemmRtol * scale);
}

TEST(FloatGemm, TwoDimensionalProductsOnEveryOperandLayout) {
  const at::Tensor a = Random({37, 53}, 1), b = Random({53, 29}, 2);
  ExpectCloseToReference(MatMul2d(a, b), a, b);
  const at::Tensor at_ = Random({53, 37}, 3).t(), bt = Random({29, 53}, 4).t();  // transposed views
  ExpectCloseToReference(MatMul2d(at_, b), at_, b);
  ExpectCloseToReference(MatMul2d(a, bt), a, bt);
  ExpectCloseToReference(MatMul2d(at_, bt), at_, bt);
  const at::Tensor strided = Random({37, 106}, 5).slice(1, 0, 106, 2);  // neither layout: copied
  ExpectCloseToReference(MatMul2d(strided, b), strided, b);
  const at::Tensor row = Random({1, 53}, 6), col = Random({53, 1}, 7);
  ExpectCloseToReference(MatMul2d(row, b), row, b);
  ExpectCloseToReference(MatMul2d(a, col), a, col);
}

TEST(FloatGemm, MatMulFollowsNumpySemantics) {
  const at::Tensor w = Random({24, 16}, 8);
  const at::Tensor x3 = Random({3, 7, 24}, 9);  // Linear on a sequence
  ExpectCloseToReference(MatMul(x3, w), x3, w);
  const at::Tensor q = Random({2, 3, 5, 24}, 10), k = Random({2, 3, 24, 5}, 11);  // batched
  ExpectCloseToReference(MatMul(q, k), q, k);
  const at::Tensor kt = Random({2, 3, 5, 24}, 12).transpose(-1, -2);  // attention's K^T view
  ExpectCloseToReference(MatMul(q, kt), q, kt);
  const at::Tensor broadcast = Random({3, 24, 5}, 13);  // batch dims broadcast: at::matmul
  ExpectCloseToReference(MatMul(q, broadcast), q, broadcast);
  const at::Tensor v = Random({24}, 14);  // 1-D operands: at::matmul
  ExpectCloseToReference(MatMul(x3, v), x3, v);
  ExpectCloseToReference(MatMul(v, w), v, w);
  const at::Tensor empty = at::zeros({0, 24});
  EXPECT_EQ(MatMul(empty, w).sizes(), (std::vector<int64_t>{0, 16}));
  const at::Tensor d = Random({4, 24}, 15).to(at::kDouble);  // other dtypes: ATen
  EXPECT_EQ(MatMul(d, w.to(at::kDouble)).scalar_type(), at::kDouble);
}

TEST(FloatGemm, RepeatedProductsAreBitIdentical) {
  const at::Tensor x = Random({64, 96}, 16), w = Random({96, 80}, 17);
  EXPECT_TRUE(at::equal(MatMul(x, w), MatMul(x, w)));
}

TEST(FloatGemm, AutogradStillFlowsThroughMatMul) {
  at::Tensor x = Random({4, 6}, 18).requires_grad_(true);
  const at::Tensor w = Random({6, 3}, 19);
  at::Tensor y = MatMul(x, w);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  // d(sum(x w))/dx = 1 w^T: every row is the row sums of w.
  EXPECT_TRUE(at::allclose(x.grad()[0], w.sum(1)));
}

}  // namespace
}  // namespace quantkit::runtime
