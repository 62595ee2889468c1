#include "formats/ranges.h"

#include <gtest/gtest.h>

namespace quantkit::formats {
namespace {

quant::QuantPlan SamplePlan() {
  quant::QuantPlan plan;
  plan.provenance.model_sha256 = "ab12";
  plan.provenance.method = "entropy";
  plan.provenance.num_samples = 2048;
  plan.SetActivationAmax("input_1:0", 2.5f, "entropy");
  plan.SetActivationAmax("/conv1/Conv_output_0", 0.1f, "entropy");
  plan.SetActivationAmax("dead", 0.0f, "entropy");
  plan.SetScale("conv1.weight", {0.01f, 0.02f, 0.03f}, 0, quant::TensorRole::kWeight, "weights");
  plan.float_nodes["/attn/Softmax"] = "Softmax kept in float by default";
  return plan;
}

TEST(RangesText, SampleInt8ApiFormatRoundTrips) {
  quant::QuantPlan plan = SamplePlan();
  const std::string text = FormatRangesText(plan);
  // amax (not scale), no spaces around ':' (sampleINT8API splits with getline(':')).
  EXPECT_EQ(text, "/conv1/Conv_output_0:0.1\ninput_1:0:2.5\n");
  auto back = ParseRangesText(text, "r.txt");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->Find("input_1:0")->amax.front(), 2.5f);
  EXPECT_EQ(back->Find("/conv1/Conv_output_0")->scale, plan.Find("/conv1/Conv_output_0")->scale);
}

TEST(RangesText, AcceptsSpacesAndCommentsRejectsGarbage) {
  auto ok = ParseRangesText("# comment\n data : 1.5 \n\n", "r.txt");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->Find("data")->amax.front(), 1.5f);
  auto bad = ParseRangesText("data: 1.5\nconv: abc\n", "r.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("r.txt:2"), std::string::npos);
  EXPECT_FALSE(ParseRangesText("novalue\n", "r.txt").ok());
  // A zero range is read but kept in float, with a reason naming the line.
  auto zero = ParseRangesText("z:0\n", "r.txt");
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->Find("z")->quantized);
  EXPECT_NE(zero->Find("z")->reason.find("r.txt:1"), std::string::npos);
}

TEST(PlanJson, IsLosslessAndDeterministic) {
  quant::QuantPlan plan = SamplePlan();
  const std::string text = FormatPlanJson(plan);
  auto back = ParsePlanJson(text, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(FormatPlanJson(*back), text);
  EXPECT_EQ(back->provenance.num_samples, 2048);
  EXPECT_EQ(back->Find("conv1.weight")->axis, 0);
  EXPECT_EQ(back->Find("conv1.weight")->scale, (std::vector<float>{0.01f, 0.02f, 0.03f}));
  EXPECT_FALSE(back->Find("dead")->quantized);
  EXPECT_EQ(back->float_nodes.at("/attn/Softmax"), "Softmax kept in float by default");
}

TEST(PlanJson, RejectsUnknownVersionsKeysAndBadScales) {
  EXPECT_FALSE(ParsePlanJson("not json", "p.json").ok());
  EXPECT_FALSE(ParsePlanJson(R"({"format":"quantkit.plan","version":2})", "p.json").ok());
  EXPECT_FALSE(ParsePlanJson(R"({"format":"other","version":1})", "p.json").ok());
  EXPECT_FALSE(ParsePlanJson(R"({"format":"quantkit.plan","version":1,"extra":1})", "p.json").ok());
  auto neg = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[-1],"amax":[1],"zero_point":[0]}}})",
      "p.json");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("'t'"), std::string::npos);
  EXPECT_NE(neg.status().message().find("p.json"), std::string::npos);
  auto typo = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scael":[1]}}})", "p.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("scael"), std::string::npos);
}

// Issue #13 items 4 and 8: a value of the wrong type names its key path and the expected type
// (it used to escape as the JSON library's exception, exit 70); asymmetric entries are refused.
TEST(PlanJson, WrongTypesNameTheKeyPath) {
  auto version = ParsePlanJson(R"({"format":"quantkit.plan","version":"1"})", "p.json");
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kInvalidModel);
  EXPECT_EQ(version.status().message(), "p.json: version: expected an integer, got string");
  auto scale = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[0.1,true],"amax":[1,2]}}})",
      "p.json");
  ASSERT_FALSE(scale.ok());
  EXPECT_EQ(scale.status().message(), "p.json: tensors.t.scale[1]: expected a number, got boolean");
  auto nodes =
      ParsePlanJson(R"({"format":"quantkit.plan","version":1,"float_nodes":{"n":3}})", "p.json");
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().message(), "p.json: float_nodes.n: expected a string, got number");
  auto huge = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[1e300],"amax":[1]}}})",
      "p.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("outside the float32 range"), std::string::npos);
}

// The float part of the written model travels with the plan (every writer of it uses the same);
// a plan written before it existed reads as FP32 (its models were).
TEST(PlanJson, FloatPrecisionRoundTripsAndOldPlansAreFp32) {
  quant::QuantPlan plan;
  plan.SetActivationAmax("x", 2.0f, "max");
  plan.float_precision.dtype = quant::FloatDType::kFloat16;
  plan.float_precision.cast_io = true;
  plan.float_precision.fp32_nodes["/ln"] = "kept in FP32 by request (--keep-fp32)";
  plan.float_precision.fp32_op_types["Softmax"] =
      "op type Softmax kept in FP32 by request (--keep-fp32)";
  plan.float_precision.fp32_tensors["big"] = "calibrated |values| reach 1e+05";
  auto back = ParsePlanJson(FormatPlanJson(plan), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->float_precision == plan.float_precision);
  EXPECT_EQ(FormatPlanJson(*back), FormatPlanJson(plan));
  auto old = ParsePlanJson(R"({"format":"quantkit.plan","version":1})", "p.json");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->float_precision.dtype, quant::FloatDType::kFloat32);
  auto bad = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"float_precision":{"dtype":"fp8"}})", "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("float_precision.dtype"), std::string::npos)
      << bad.status().message();
  auto typo = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"float_precision":{"fp32_node":{}}})", "p.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("fp32_node"), std::string::npos);
}

TEST(PlanJson, AsymmetricAndDenormalEntriesAreRefused) {
  auto zp = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[0.1],"amax":[12.7],"zero_point":[5]}}})",
      "p.json");
  ASSERT_FALSE(zp.ok());
  EXPECT_EQ(zp.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(zp.status().message().find("tensors.t.zero_point[0]: 5 is not 0"), std::string::npos);
  auto u8 = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[0.1],"amax":[12.7],"zero_point":[0],"dtype":"uint8"}}})",
      "p.json");
  ASSERT_FALSE(u8.ok());
  EXPECT_NE(u8.status().message().find("tensors.t.dtype: uint8"), std::string::npos);
  auto denormal = ParsePlanJson(
      R"({"format":"quantkit.plan","version":1,"tensors":{"t":{"scale":[1.4e-45],"amax":[1e-43],"zero_point":[0]}}})",
      "p.json");
  ASSERT_FALSE(denormal.ok());
  EXPECT_NE(denormal.status().message().find("not a positive normal float"), std::string::npos);
}

}  // namespace
}  // namespace quantkit::formats
