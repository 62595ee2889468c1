// analysis/float16_check.h on a chain built to need FP32 at known places:
//   a = x + 1000      FP16 keeps 0.5 steps at 1000: x's digits are lost (precision)
//   b = a - 1000      reads a; in FP16 it rounds a again: lost too
//   m = b * 30000     |m| up to ~1e5 > 65504: overflow (range)
//   y = m * 1e-4      reads m: in FP16 its input is inf
//   out = y + 1       fits: rounding noise only
// with x ~ N(0, 1) fed from a .npy. Every node but `out` must be pinned, each for its reason,
// and the all-FP16 run must be far worse than `out` alone.
#include "analysis/float16_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "data/npy.h"
#include "onnx/export.h"

namespace quantkit::analysis {
namespace {

using ir::DType;
using ir::Tensor;

std::string Build(const std::string& dir) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Known(8)});
  g.AddInput(x);
  auto c = [&](const std::string& name, float v) { return g.AddInitializer(name, Tensor::FromVector<float>(DType::kFloat, {}, {v})); };
  auto node = [&](const std::string& op, ir::Value* a, ir::Value* b, const std::string& out) {
    return g.AddNode(op, {a, b}, {out}, "", "n_" + out).value()->output(0);
  };
  ir::Value* a = node("Add", x, c("k1000", 1000.0f), "a");
  ir::Value* b = node("Sub", a, c("k1000b", 1000.0f), "b");
  ir::Value* mm = node("Mul", b, c("k30000", 30000.0f), "m");
  ir::Value* y = node("Mul", mm, c("k1e-4", 1e-4f), "y");
  g.AddOutput(node("Add", y, c("one", 1.0f), "out"));
  const std::string path = dir + "/chain.onnx";
  EXPECT_TRUE(onnx_io::ExportModel(m, path).ok());
  return path;
}

std::string Data(const std::string& dir) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> v(64 * 8);
  for (float& f : v) f = normal(rng);
  v[0] = 3.5f;  // |m| = 105000 at least once
  const std::string path = dir + "/x.npy";
  EXPECT_TRUE(data::WriteNpy(path, Tensor::FromVector<float>(DType::kFloat, {64, 8}, v)).ok());
  return path;
}

class Float16CheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("qk_f16check_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir_);
    PlanEvalOptions o;
    o.model = Build(dir_);
    o.data = Data(dir_);
    o.batch_size = 16;
    auto e = PlanEvaluator::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(e).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::unique_ptr<PlanEvaluator> evaluator_;
};

const Float16LayerRow& Row(const Float16CheckResult& r, const std::string& node) {
  for (const Float16LayerRow& row : r.rows) {
    if (row.node == node) return row;
  }
  ADD_FAILURE() << "no row " << node;
  return r.rows.front();
}

TEST_F(Float16CheckTest, PinsTheLayersThatLoseRangeOrPrecisionAndKeepsTheRest) {
  Float16CheckOptions o;
  o.progress = false;
  auto r = CheckFloat16Layers(*evaluator_, evaluator_->float_model(), {}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pin_to_fp32, (std::vector<std::string>{"n_a", "n_b", "n_m", "n_y"})) << FormatFloat16CheckTable(*r, 10);
  EXPECT_EQ(Row(*r, "n_m").range.verdict, quant::FloatRangeVerdict::kOverflow) << Row(*r, "n_m").reason;
  EXPECT_NE(Row(*r, "n_m").reason.find("'m'"), std::string::npos) << Row(*r, "n_m").reason;
  EXPECT_TRUE(Row(*r, "n_a").range.fits()) << "a's range fits; it is pinned for its error";
  EXPECT_GT(Row(*r, "n_a").isolated_output.rel_mse, o.max_output_rel_mse);
  const Float16LayerRow& out = Row(*r, "n_out");
  EXPECT_FALSE(out.pin) << out.reason;
  EXPECT_LT(out.isolated_output.rel_mse, 1e-6) << "float16 rounding of ~1 values: ~1e-7";
  EXPECT_GT(r->all_output.rel_mse, 1e3 * out.isolated_output.rel_mse);
  EXPECT_EQ(r->trials, 1 + 5 + 1);
  // bfloat16 has float32's range: `m` is no longer an overflow (all are pinned for precision:
  // 8 significant bits), and `out` costs more than in float16.
  o.range.dtype = DType::kBFloat16;
  auto bf = CheckFloat16Layers(*evaluator_, evaluator_->float_model(), {}, o);
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  EXPECT_TRUE(Row(*bf, "n_m").range.fits());
  EXPECT_GT(Row(*bf, "n_out").isolated_output.rel_mse, out.isolated_output.rel_mse);
}

TEST_F(Float16CheckTest, NodesOptionRestrictsAndUnknownNamesAreErrors) {
  Float16CheckOptions o;
  o.progress = false;
  o.nodes = {"n_out"};
  auto r = CheckFloat16Layers(*evaluator_, evaluator_->float_model(), {}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_TRUE(r->pin_to_fp32.empty());
  o.nodes = {"n_nope"};
  auto bad = CheckFloat16Layers(*evaluator_, evaluator_->float_model(), {}, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("n_nope"), std::string::npos) << bad.status().ToString();
  o.nodes.clear();
  o.range.range_margin = 0.5;
  EXPECT_EQ(CheckFloat16Layers(*evaluator_, evaluator_->float_model(), {}, o).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantkit::analysis
