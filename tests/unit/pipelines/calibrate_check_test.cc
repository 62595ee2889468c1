// The accuracy check every calibration ends with (pipelines/calibrate/check.h): its size, where
// its samples come from (held out after the calibrated ones, --holdout, or in-sample), and its
// verdict on plain_cnn: a good plan passes, a plan with blown-up ranges warns and names the fixes.
#include "pipelines/calibrate/check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "data/source.h"
#include "pipelines/calibrate/calibrate.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

// The check's figures recomputed from scratch must match to this relative error: both sides sum
// the same float32 outputs in double, in another order (batches vs one run).
constexpr double kFigureRelTol = 1e-6;

// The first output of `model` on `batch`, as floats.
std::vector<float> RunOn(ir::Model model, const data::Batch& batch) {
  auto it = runtime::Interpreter::Create(std::move(model));
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  if (!it.ok()) return {};
  std::vector<runtime::NamedTensor> inputs;
  for (const auto& [name, t] : batch.inputs) inputs.push_back({name, t});
  auto out = (*it)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  const float* y = (*out)[0].tensor.data_as<float>();
  return std::vector<float>(y, y + (*out)[0].tensor.numel());
}

TEST(CheckSampleCount, OneInSixteenWithinAFloorAndACap) {
  EXPECT_EQ(CheckSampleCount(kAutoCheckSamples, 64), kCheckMinSamples);  // 4 -> the floor
  EXPECT_EQ(CheckSampleCount(kAutoCheckSamples, 2048), 128);
  EXPECT_EQ(CheckSampleCount(kAutoCheckSamples, 1 << 20), kCheckMaxSamples);
  EXPECT_EQ(CheckSampleCount(5, 2048), 5);  // the user's count stands
  EXPECT_EQ(CheckSampleCount(0, 2048), 0);
}

TEST(ChooseCheckData, TheSamplesAfterTheCalibratedOnesAreHeldOut) {
  analysis::PlanEvalOptions eval;
  CheckResult r;
  ASSERT_TRUE(
      ChooseCheckData({}, {kModel, "d.npy", /*calibrated=*/512, /*data_total=*/2048}, &eval, &r)
          .ok());
  EXPECT_EQ(eval.data, "d.npy");
  EXPECT_EQ(eval.first_sample, 512);  // disjoint from [0, 512)
  EXPECT_EQ(eval.samples, 32);
  EXPECT_EQ(r.origin, "held-out");
  EXPECT_FALSE(r.in_sample);
  // Fewer left than the check's size: what is left.
  ASSERT_TRUE(ChooseCheckData({}, {kModel, "d.npy", 2040, 2048}, &eval, &r).ok());
  EXPECT_EQ(eval.first_sample, 2040);
  EXPECT_EQ(eval.samples, 8);
}

TEST(ChooseCheckData, AllOfTheDataCalibratedOnGivesAnInSampleTail) {
  analysis::PlanEvalOptions eval;
  CheckResult r;
  ASSERT_TRUE(ChooseCheckData({}, {kModel, "d.npy", 2048, 2048}, &eval, &r).ok());
  EXPECT_EQ(eval.first_sample, 2048 - 128);
  EXPECT_EQ(eval.samples, 128);
  EXPECT_EQ(r.origin, "in-sample");
  EXPECT_TRUE(r.in_sample);
  // Less data than the floor: all of it.
  ASSERT_TRUE(ChooseCheckData({}, {kModel, "d.npy", 10, 10}, &eval, &r).ok());
  EXPECT_EQ(eval.first_sample, 0);
  EXPECT_EQ(eval.samples, 10);
}

TEST(ChooseCheckData, HoldoutWinsAndStatisticsAloneNeedIt) {
  analysis::PlanEvalOptions eval;
  CheckResult r;
  CheckOptions options;
  options.holdout = "val.npy";
  ASSERT_TRUE(ChooseCheckData(options, {kModel, "d.npy", 2048, 2048}, &eval, &r).ok());
  EXPECT_EQ(eval.data, "val.npy");
  EXPECT_EQ(eval.first_sample, 0);
  EXPECT_EQ(eval.samples, 128);
  EXPECT_EQ(r.origin, "held-out (--holdout)");
  options.holdout_samples = 7;
  ASSERT_TRUE(ChooseCheckData(options, {kModel, "", 2048, 0}, &eval, &r).ok());
  EXPECT_EQ(eval.samples, 7);
  // Without it, statistics (no data) cannot be checked: an error naming the way out.
  Status none = ChooseCheckData({}, {kModel, "", 2048, 0}, &eval, &r);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("--holdout"), std::string::npos) << none.message();
}

TEST(CalibrateCheck, AGoodPlanPassesAndBlownRangesWarn) {
  CalibrateOptions options;
  options.model = kModel;
  options.data = "fashion-mnist:calib";
  options.samples = 64;
  options.progress = false;
  options.check.samples = 32;
  auto r = Calibrate(options);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << r.status().message();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CheckResult& check = r->check;
  ASSERT_TRUE(check.ran) << check.skipped;
  EXPECT_EQ(check.origin, "held-out");
  EXPECT_EQ(check.first_sample, 64);
  EXPECT_EQ(check.samples, 32);
  EXPECT_TRUE(check.class_output);
  EXPECT_GE(check.agreement, kCheckMinAgreement);
  EXPECT_LT(check.rel_mse, kCheckMaxRelMse);
  EXPECT_TRUE(check.warning.empty()) << check.warning;
  EXPECT_NE(r->summary.find("check: 32 held-out samples"), std::string::npos) << r->summary;

  {
    // The figures, independently: samples [64, 96) read by hand, the FP32 model and the plan's
    // simulation run once each, rel MSE and argmax agreement summed here.
    auto fp32 = analysis::LoadModelForQuantization(kModel);
    ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
    auto source = data::OpenSource(options.data, data::ModelInputs(*fp32), {});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    auto batch = (*source)->Read(64, 32);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    analysis::SimulationOptions sim;
    sim.placement = options.placement;
    sim.mode = passes::PlacementPolicy::kTensorRT;
    auto simulated = analysis::BuildSimulationModel(kModel, r->plan, sim);
    ASSERT_TRUE(simulated.ok()) << simulated.status().ToString();
    const std::vector<float> ref = RunOn(std::move(*fp32), *batch);
    const std::vector<float> out = RunOn(std::move(*simulated), *batch);
    ASSERT_EQ(ref.size(), out.size());
    ASSERT_EQ(ref.size() % 32, 0u);
    const size_t classes = ref.size() / 32;
    double err2 = 0, ref2 = 0;
    int agree = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err2 += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
      ref2 += double(ref[i]) * ref[i];
    }
    for (size_t b = 0; b < 32; ++b) {
      const auto first = [&](const std::vector<float>& v) {
        return std::max_element(v.begin() + b * classes, v.begin() + (b + 1) * classes) - v.begin();
      };
      agree += first(ref) == first(out);
    }
    EXPECT_NEAR(check.rel_mse, err2 / ref2, kFigureRelTol * err2 / ref2);
    EXPECT_DOUBLE_EQ(check.agreement, agree / 32.0);
  }

  // Every activation range 1000x too wide: the int8 grid leaves the real values a level or two.
  quant::QuantPlan blown = r->plan;
  for (auto& [name, t] : blown.tensors) {
    if (!t.quantized || t.role != quant::TensorRole::kActivation) continue;
    for (float& a : t.amax) a *= 1000;
    for (float& s : t.scale) s *= 1000;
  }
  analysis::PlanEvalOptions eval;
  eval.simulation.placement = options.placement;
  CheckResult judged;
  ASSERT_TRUE(
      ChooseCheckData(options.check, {kModel, options.data, 64, 2048}, &eval, &judged).ok());
  auto evaluator = analysis::PlanEvaluator::Create(eval);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  ASSERT_TRUE(JudgePlan(**evaluator, blown, "out/plan.json", /*own_evaluator=*/true, &judged).ok());
  EXPECT_LT(judged.agreement, kCheckMinAgreement);
  for (const char* fix : {"--method auto", "--budget", "quantkit analyze", "out/plan.json"}) {
    EXPECT_NE(judged.warning.find(fix), std::string::npos) << fix << ": " << judged.warning;
  }
  EXPECT_NE(FormatCheck(judged).find("warning: check:"), std::string::npos) << FormatCheck(judged);

  // samples 0: no check at all.
  options.check.samples = 0;
  auto off = Calibrate(options);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->check.ran);
  EXPECT_EQ(off->summary.find("check:"), std::string::npos) << off->summary;
}

}  // namespace
}  // namespace quantkit::pipelines
