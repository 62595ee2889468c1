// calibrate's stages kept for many plans (--compare-methods): one preparation (load, hash, sites,
// one statistics pass) finished with any method gives exactly the plan of a plain calibration.
#include "pipelines/calibrate/calibrate.h"

#include <gtest/gtest.h>

#include "formats/ranges.h"
#include "quant/method.h"

namespace quantkit::pipelines {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

CalibrateOptions Options() {
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.samples = 32;
  o.progress = false;
  return o;
}

TEST(PrepareCalibration, EveryMethodFromOnePreparationIsThePlainCalibration) {
  CalibrateOptions options = Options();
  auto prepared = PrepareCalibration(options);
  if (!prepared.ok() && prepared.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << prepared.status().message();
  }
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(prepared->statistics.samples, 32);
  EXPECT_FALSE(prepared->model.sha256.empty());
  for (const quant::MethodRequest& method : quant::AllMethods()) {
    SCOPED_TRACE(quant::MethodLabel(method));
    options.method = method;
    auto finished = FinishCalibration(options, *prepared);
    ASSERT_TRUE(finished.ok()) << finished.status().ToString();
    auto plain = Calibrate(options);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(formats::FormatPlanJson(finished->plan), formats::FormatPlanJson(plain->plan));
    EXPECT_EQ(finished->warnings, plain->warnings);
    EXPECT_EQ(finished->samples, 32);
  }
}

TEST(PrepareCalibration, AnOverrideNamingNothingFailsBeforeTheDataIsRead) {
  CalibrateOptions options = Options();
  options.data = "input=/nonexistent/quantkit/calib.npy";
  options.method_overrides["no_such_tensor"] = {quant::CalibMethod::kEntropy};
  auto prepared = PrepareCalibration(options);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kNotFound);
  EXPECT_NE(prepared.status().message().find("'no_such_tensor'"), std::string::npos)
      << prepared.status().message();
}

}  // namespace
}  // namespace quantkit::pipelines
