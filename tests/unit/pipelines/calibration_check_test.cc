// The check every calibrate makes of what it wrote (pipelines/calibration_check.h): a model INT8
// ruins is said loudly, a healthy one is not, and the check never changes the calibration.
#include "pipelines/calibration_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "data/npy.h"
#include "formats/ranges.h"
#include "pipelines/calibrate.h"
#include "testing/text_models.h"

namespace quantkit::pipelines {
namespace {

// y[N, 1] = x[N, 4] . w: a score, not a class vector, so the check judges the relative MSE.
constexpr const char* kScoreModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
score (float[N, 4] x) => (float[N, 1] y) {
  w = Constant <value = float[4, 1] {0.0, 1.0, -2.0, 3.0}> ()
  y = MatMul(x, w)
}
)";

// 64 samples; `spike`: feature 0 (which the score ignores) spans +-1e4 while the others span
// +-0.01, as a power spectrum's bins do. Per-tensor int8 of x then has a step of ~79 and rounds
// every feature the score reads to 0: the INT8 output is 0, a relative MSE of 1.
std::string WriteData(const testing::TempDir& dir, bool spike) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j) x.push_back(u(rng) * (spike ? (j == 0 ? 1e4f : 1e-2f) : 1.0f));
  }
  const std::string path = dir.File(spike ? "spiky.npy" : "plain.npy");
  EXPECT_TRUE(data::WriteNpy(path, ir::Tensor::FromVector<float>(ir::DType::kFloat, {64, 4}, x)).ok());
  return "x=" + path;
}

CalibrateOptions Options(const testing::TempDir& dir, bool spike) {
  CalibrateOptions o;
  o.model = testing::WriteModel(dir, "score.onnx", kScoreModel);
  o.data = WriteData(dir, spike);
  o.progress = false;
  return o;
}

TEST(CalibrationCheck, SampleCountIsAThirtySecondBetween8And64) {
  EXPECT_EQ(CheckSampleCount(3), 3);
  EXPECT_EQ(CheckSampleCount(8), 8);
  EXPECT_EQ(CheckSampleCount(48), 8);
  EXPECT_EQ(CheckSampleCount(512), 16);
  EXPECT_EQ(CheckSampleCount(2048), 64);
  EXPECT_EQ(CheckSampleCount(100000), 64);
}

TEST(CalibrationCheck, ARuinedModelIsSaidLoudlyWithTheFix) {
  testing::TempDir dir;
  CalibrateOptions o = Options(dir, /*spike=*/true);
  o.output_dir = dir.File("out");
  auto r = Calibrate(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.ran) << r->check.not_run;
  EXPECT_EQ(r->check.metric, "rel_mse") << "a [N, 1] score is not a class vector";
  EXPECT_EQ(r->check.samples, 8) << "64 samples: CheckSampleCount gives 8";
  EXPECT_FALSE(r->check.held_out);
  EXPECT_NEAR(r->check.output.relative_mse(), 1.0, 1e-6) << "every feature the score reads rounds to 0";
  EXPECT_TRUE(r->check.ruined);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("--method auto"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("--budget 0.01 --metric rel_mse"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->summary.find("check: INT8 vs FP32 on 8 samples"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("FAILED"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("layers kept in float: 0 (none)"), std::string::npos) << r->summary;
  // A class output: 1 changed argmax of 8 is 12.5 points but no verdict; 2 are.
  analysis::ErrorStats healthy;
  EXPECT_FALSE(CheckFromEvaluation("agreement", 1.0, 0.875, healthy, 8, "d").ruined);
  EXPECT_TRUE(CheckFromEvaluation("agreement", 1.0, 0.75, healthy, 8, "d").ruined);
  EXPECT_FALSE(CheckFromEvaluation("top1", 0.9, 0.86, healthy, 64, "d").ruined) << "4 points: within the limit";
  EXPECT_TRUE(CheckFromEvaluation("top1", 0.9, 0.80, healthy, 64, "d").ruined);
  // After --method auto, only the budget is left to name.
  EXPECT_EQ(CheckWarning(r->check, /*after_auto=*/true).find("--method auto"), std::string::npos);
}

TEST(CalibrationCheck, AHealthyModelPassesAndTheCheckChangesNothing) {
  testing::TempDir dir;
  CalibrateOptions o = Options(dir, /*spike=*/false);
  auto checked = Calibrate(o);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  ASSERT_TRUE(checked->check.ran);
  EXPECT_FALSE(checked->check.ruined);
  EXPECT_LT(checked->check.output.relative_mse(), 1e-3);
  EXPECT_TRUE(checked->warnings.empty());
  EXPECT_NE(checked->summary.find(": ok"), std::string::npos) << checked->summary;
  // The check samples are also calibration samples: the plan is the one without the check.
  o.check.samples = 0;
  auto unchecked = Calibrate(o);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_FALSE(unchecked->check.ran);
  EXPECT_NE(unchecked->summary.find("check: not run: off (--check-samples 0)"), std::string::npos);
  EXPECT_EQ(formats::FormatPlanJson(checked->plan), formats::FormatPlanJson(unchecked->plan));
}

TEST(CalibrationCheck, HoldoutIsCheckedInsteadOfTheCalibrationData) {
  testing::TempDir dir;
  CalibrateOptions o = Options(dir, /*spike=*/false);
  // Calibrated on plain data, checked on spiky data: the held-out samples are far out of range.
  o.check.holdout = WriteData(dir, /*spike=*/true);
  auto r = Calibrate(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->check.held_out);
  EXPECT_EQ(r->check.samples, 64) << "all of a held-out set up to kCheckMaxSamples";
  EXPECT_TRUE(r->check.ruined);
  EXPECT_NE(r->summary.find("(held out)"), std::string::npos) << r->summary;
}

TEST(CalibrationCheck, BadOptionsAndMissingSamplesAreSaid) {
  testing::TempDir dir;
  CalibrateOptions o = Options(dir, false);
  o.check.samples = -2;
  auto bad = Calibrate(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--check-samples"), std::string::npos);
  // A holdout that does not exist is an error naming it, not a silent skip.
  o.check.samples = -1;
  o.check.holdout = "x=" + dir.File("missing.npy");
  auto missing = Calibrate(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.npy"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace quantkit::pipelines
