// eval's agreement with a reference comes from analysis::ErrorStats, the one cosine/SQNR: on a
// model whose output is all zeros, compared with itself, cosine is 1 (eval's own sums said 0).
#include "pipelines/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "data/npy.h"
#include "ir/tensor.h"
#include "testing/text_models.h"

namespace quantkit::pipelines {
namespace {

using testing::TempDir;
using testing::WriteModel;

constexpr const char* kZeroModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
zero (float[N, 4] x) => (float[N, 4] y) {
  z = Constant <value = float[1] {0.0}> ()
  y = Mul(x, z)
}
)";

constexpr const char* kIdentityModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
same (float[N, 4] x) => (float[N, 4] y) {
  y = Identity(x)
}
)";

std::string WriteInputs(const TempDir& dir) {
  std::vector<float> values(6 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  const std::string path = dir.File("x.npy");
  EXPECT_TRUE(
      data::WriteNpy(path, ir::Tensor::FromVector<float>(ir::DType::kFloat, {6, 4}, values)).ok());
  return "x=" + path;
}

TEST(Evaluate, AllZeroOutputsAgreeWithThemselves) {
  TempDir dir;
  EvalOptions o;
  o.model = WriteModel(dir, "zero.onnx", kZeroModel);
  o.reference_model = o.model;
  o.data = WriteInputs(dir);
  o.batch_size = 4;  // two batches: the per-batch sums are merged
  o.progress = false;
  Result<EvalResult> r = Evaluate(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->agreement.has_value());
  EXPECT_EQ(r->agreement->cosine, 1.0);
  EXPECT_TRUE(std::isinf(r->agreement->sqnr_db) && r->agreement->sqnr_db > 0);
  EXPECT_EQ(r->agreement->max_abs_error, 0.0);
  EXPECT_EQ(r->agreement->argmax_agreement, 1.0);
}

TEST(Evaluate, ZeroOutputAgainstARealOneIsOrthogonal) {
  TempDir dir;
  EvalOptions o;
  o.model = WriteModel(dir, "zero.onnx", kZeroModel);
  o.reference_model = WriteModel(dir, "same.onnx", kIdentityModel);
  o.data = WriteInputs(dir);
  o.progress = false;
  Result<EvalResult> r = Evaluate(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->agreement.has_value());
  EXPECT_EQ(r->agreement->cosine, 0.0);
  EXPECT_DOUBLE_EQ(r->agreement->sqnr_db, 0.0);  // 10 log10(|ref|^2 / |ref|^2)
  EXPECT_EQ(r->agreement->max_abs_error, 3.0);
}

}  // namespace
}  // namespace quantkit::pipelines
