// The one method vocabulary (quant/method.h): every spelling a user can type, its label, the
// order of AllMethods, and the errors. Without one parser, `tensor-calib` and `calibrate` used to
// accept different percentile ranges.
#include <gtest/gtest.h>

#include "quant/method.h"
#include "quant/method_amax.h"

namespace quantkit::quant {
namespace {

TEST(Method, ParseAndLabelRoundTrip) {
  for (const char* text :
       {"max", "entropy", "mse", "percentile:99.99", "percentile:99.9", "percentile:100"}) {
    auto m = ParseMethod(text);
    ASSERT_TRUE(m.ok()) << text << ": " << m.status().ToString();
    EXPECT_EQ(MethodLabel(*m), text);
    EXPECT_EQ(*ParseMethod(MethodLabel(*m)), *m);
  }
  // Bare "percentile" (and an empty parameter) is the default 99.99.
  EXPECT_EQ(MethodLabel(*ParseMethod("percentile")), "percentile:99.99");
  EXPECT_EQ(MethodLabel(*ParseMethod("percentile:")), "percentile:99.99");
}

TEST(Method, RejectsUnknownNamesAndPercentilesOutsideZeroToHundred) {
  for (const char* text : {"kl", "Max", "", "percentile:0", "percentile:-1", "percentile:100.5",
                           "percentile:abc", "percentile:99x", "all"}) {
    auto m = ParseMethod(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(ParseMethod("percentile:abc").status().message().find("bad percentile"),
            std::string::npos);
  EXPECT_NE(ParseMethod("kl").status().message().find("'kl'"), std::string::npos);
}

TEST(Method, AllMethodsInReportOrderAndKeyedByWhatTheyCompute) {
  const std::vector<MethodRequest> all = AllMethods();
  std::vector<std::string> labels;
  for (const MethodRequest& m : all) labels.push_back(MethodLabel(m));
  EXPECT_EQ(labels, (std::vector<std::string>{"max", "entropy", "percentile:99.99", "mse"}));
  // The percentile parameter matters only for percentile (a map keyed by method is safe).
  EXPECT_EQ((MethodRequest{CalibMethod::kMax, 1.0}), (MethodRequest{CalibMethod::kMax, 50.0}));
  EXPECT_FALSE((MethodRequest{CalibMethod::kPercentile, 99.9}) ==
               DefaultRequest(CalibMethod::kPercentile));
  EXPECT_TRUE((MethodRequest{CalibMethod::kPercentile, 99.9}) <
              DefaultRequest(CalibMethod::kPercentile));
}

TEST(Method, TheOneSwitchGivesTheExactAmaxForMaxAndRoutesEveryOtherMethodToItsCalibrator) {
  // |x| histogram of 2048 bins over [0, 4]: most mass below 1, a thin tail to 4.
  Histogram hist;
  hist.edges.resize(2049);
  for (size_t i = 0; i < hist.edges.size(); ++i)
    hist.edges[i] = 4.0 * static_cast<double>(i) / 2048.0;
  hist.counts.assign(2048, 0);
  for (int i = 0; i < 512; ++i) hist.counts[i] = 1000;
  hist.counts[2047] = 1;
  auto max = AmaxFromHistogram(hist, 4.0f, DefaultRequest(CalibMethod::kMax));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->amax, 4.0f);
  // Each method routes to its calibrator with the request's parameter.
  auto entropy = AmaxFromHistogram(hist, 4.0f, DefaultRequest(CalibMethod::kEntropy));
  auto percentile = AmaxFromHistogram(hist, 4.0f, *ParseMethod("percentile:99.9"));
  auto mse = AmaxFromHistogram(hist, 4.0f, DefaultRequest(CalibMethod::kMse));
  ASSERT_TRUE(entropy.ok() && percentile.ok() && mse.ok());
  EXPECT_EQ(entropy->amax, EntropyAmax(hist, EntropyOptions{})->amax);
  PercentileOptions p999;
  p999.percentile = 99.9;
  EXPECT_EQ(percentile->amax, PercentileAmax(hist, p999)->amax);
  EXPECT_LT(percentile->amax, 4.0f);  // the one-count tail is above the 99.9th percentile
  EXPECT_EQ(mse->amax, MseAmax(hist, MseOptions{})->amax);
}

}  // namespace
}  // namespace quantkit::quant
