#include "formats/trt_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "formats/scale_problem.h"
#include "testing/testvectors.h"

namespace quantkit::formats {
namespace {

using nlohmann::json;

json LoadCacheVectors() {
  const std::string dir = quantkit::testing::FindTestVectorsDir();
  EXPECT_FALSE(dir.empty()) << "shared/testvectors not found";
  std::ifstream in(dir + "/cache_lines.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);
}

float FloatFromHex(const std::string& hex) { return DecodeScaleHex(hex).value(); }

// Issue #13 item 8: a tensor listed twice is an error naming both lines; unusable scales are
// named and never become quantized plan entries.
TEST(TrtCache, DuplicateTensorLinesAreAnError) {
  auto cache = ParseTrtCache(
      "TRT-8601-EntropyCalibration2\nx: 3c010a14\ny: 3c010a14\nx: 3d010a14\n", "c.cache");
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(cache.status().message().find("c.cache:4: tensor 'x' already has a scale on line 2"),
            std::string::npos)
      << cache.status().message();
}

TEST(TrtCache, UnusableScalesAreNamedAndKeptFloat) {
  EXPECT_EQ(ScaleProblem(0.1f), nullptr);
  EXPECT_STREQ(ScaleProblem(1.4e-45f), "denormal");
  EXPECT_STREQ(ScaleProblem(0.0f), "zero");
  EXPECT_STREQ(ScaleProblem(-1.0f), "negative");
  EXPECT_STREQ(ScaleProblem(std::numeric_limits<float>::infinity()), "infinite");
  EXPECT_STREQ(ScaleProblem(std::numeric_limits<float>::quiet_NaN()), "NaN");
  auto cache =
      ParseTrtCache("TRT-8601-EntropyCalibration2\ndn: 00000001\nok: 3c010a14\n", "c.cache");
  ASSERT_TRUE(cache.ok());
  const quant::QuantPlan plan = PlanFromTrtCache(*cache);
  EXPECT_FALSE(plan.Find("dn")->quantized);
  EXPECT_NE(plan.Find("dn")->reason.find("denormal"), std::string::npos);
  EXPECT_TRUE(plan.Find("ok")->quantized);
  EXPECT_EQ(FormatTrtCache(plan, {}).find("00000001"), std::string::npos);
}

TEST(TrtCacheVectors, EncodeEveryAmaxExactly) {
  json v = LoadCacheVectors();
  ASSERT_GE(v["encode"].size(), 10u);
  for (const json& e : v["encode"]) {
    const float amax = FloatFromHex(e["amax_f32_hex"].get<std::string>());
    const float scale = quant::ScaleFromAmax(amax);
    EXPECT_EQ(EncodeScaleHex(scale), e["hex_%08x"].get<std::string>()) << "amax " << amax;
  }
}

TEST(TrtCacheVectors, DecodeRealCacheLines) {
  json v = LoadCacheVectors();
  for (const json& d : v["decode"]) {
    const float scale = FloatFromHex(d["hex"].get<std::string>());
    EXPECT_FLOAT_EQ(scale, d["scale"].get<float>()) << d["hex"];
    EXPECT_NEAR(scale * 127.0, d["amax_float64"].get<double>(),
                1e-9 * d["amax_float64"].get<double>());
  }
}

TEST(TrtCacheVectors, HeaderVersionsMatchObservedCaches) {
  json v = LoadCacheVectors();
  for (const json& e : v["header_version"]["examples"]) {
    const std::string header = e["header"];
    auto version = ParseTrtVersion(e["tensorrt"].get<std::string>());
    ASSERT_TRUE(version.ok()) << version.status().ToString();
    const std::string algorithm = header.substr(header.rfind('-') + 1);
    auto calibrator = ParseTrtCalibrator(algorithm);
    ASSERT_TRUE(calibrator.ok());
    quant::QuantPlan empty;
    const std::string text = FormatTrtCache(empty, {*version, *calibrator});
    EXPECT_EQ(text, header + "\n");
    auto parsed = ParseTrtCache(text, "x.cache");
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(TrtVersionFromHeaderNumber(parsed->version_number).ToString(), version->ToString());
  }
}

TEST(TrtCacheVectors, ReaderSplitsOnLastColonSpace) {
  json v = LoadCacheVectors();
  std::string text = "TRT-8601-EntropyCalibration2\n";
  for (const json& c : v["reader_cases"]) text += c["line"].get<std::string>() + "\n";
  auto cache = ParseTrtCache(text, "cases.cache");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_EQ(cache->scales.size(), v["reader_cases"].size());
  for (size_t i = 0; i < cache->scales.size(); ++i) {
    const json& c = v["reader_cases"][i];
    EXPECT_EQ(cache->scales[i].first, c["name"].get<std::string>());
    EXPECT_EQ(cache->scales[i].second, FloatFromHex(c["hex"].get<std::string>()));
  }
}

TEST(TrtCacheVectors, WritesTheTv2ExampleFileByteForByte) {
  const std::string dir = quantkit::testing::FindTestVectorsDir();
  auto expected = ReadFileToString(dir + "/tv2_pq_entropy.trt8601.cache");
  ASSERT_TRUE(expected.ok());
  quant::QuantPlan plan;
  plan.SetActivationAmax("x", 7.5f, "entropy");
  EXPECT_EQ(FormatTrtCache(plan, {TrtVersion{8, 6, 1}, TrtCalibrator::kEntropy2}), *expected);
}

TEST(TrtCache, RoundTripIsExactThroughFile) {
  quant::QuantPlan plan;
  plan.SetActivationAmax("input", 2.640625f, "max");
  plan.SetActivationAmax("/layer1/Relu_output_0", 7.621547222137451f, "entropy");
  plan.SetActivationAmax("tiny", 1e-30f, "max");  // needs the zero padding
  plan.SetScale("w", {0.1f, 0.2f}, 0, quant::TensorRole::kWeight, "weights");  // not in caches
  const std::string path = ::testing::TempDir() + "/rt.cache";
  ASSERT_TRUE(WriteTrtCache(path, plan, {}).ok());
  auto cache = ReadTrtCache(path);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->version_number, 8601);
  ASSERT_EQ(cache->scales.size(), 3u);
  quant::QuantPlan back = PlanFromTrtCache(*cache);
  for (const auto& [name, t] : back.tensors) {
    ASSERT_NE(plan.Find(name), nullptr);
    EXPECT_EQ(t.scale, plan.Find(name)->scale) << name;  // bit-exact
  }
  EXPECT_EQ(FormatTrtCache(back, {}), FormatTrtCache(plan, {}));
  EXPECT_NE(FormatTrtCache(plan, {}).find("tiny: 0a238973"), std::string::npos);
}

TEST(TrtCache, DegenerateAmaxNeverWritesABadScale) {
  quant::QuantPlan plan;
  EXPECT_FALSE(plan.SetActivationAmax("zero", 0.0f, "max").quantized);
  EXPECT_FALSE(plan.SetActivationAmax("nan", std::nanf(""), "max").quantized);
  EXPECT_FALSE(plan.SetActivationAmax("inf", INFINITY, "max").quantized);
  EXPECT_FALSE(plan.SetActivationAmax("neg", -1.0f, "max").quantized);
  EXPECT_EQ(FormatTrtCache(plan, {}), "TRT-8601-EntropyCalibration2\n");
  EXPECT_TRUE(quant::ValidatePlan(plan).ok());
}

TEST(TrtCache, RejectsBadFilesWithOneLineNamingTheLine) {
  EXPECT_FALSE(ParseTrtCache("", "a.cache").ok());
  auto no_header = ParseTrtCache("data: 3c000889\n", "a.cache");
  ASSERT_FALSE(no_header.ok());
  EXPECT_NE(no_header.status().message().find("a.cache:1"), std::string::npos);
  auto bad_hex = ParseTrtCache("TRT-8601-EntropyCalibration2\ndata: 3c00zz89\n", "b.cache");
  ASSERT_FALSE(bad_hex.ok());
  EXPECT_NE(bad_hex.status().message().find("b.cache:2"), std::string::npos);
  EXPECT_FALSE(ParseTrtCache("TRT-8601-EntropyCalibration2\nno separator\n", "c.cache").ok());
  EXPECT_FALSE(ParseTrtCache("TRT-86a1-EntropyCalibration2\n", "d.cache").ok());
  EXPECT_FALSE(ParseTrtCache("TRT-8601-EntropyCalibration2\nx: 123456789\n", "e.cache").ok());
  EXPECT_EQ(ReadTrtCache("/nonexistent/x.cache").status().code(), StatusCode::kNotFound);
}

TEST(TrtVersion, ParsesAndRejects) {
  EXPECT_EQ(ParseTrtVersion("8.6.1")->HeaderNumber(), 8601);
  EXPECT_EQ(ParseTrtVersion("8.5.10")->HeaderNumber(), 8510);
  EXPECT_EQ(ParseTrtVersion("10.3")->HeaderNumber(), 100300);
  EXPECT_EQ(ParseTrtVersion("10.16.0")->HeaderNumber(), 101600);
  EXPECT_EQ(TrtVersionFromHeaderNumber(101600).ToString(), "10.16.0");
  EXPECT_FALSE(ParseTrtVersion("8").ok());
  EXPECT_FALSE(ParseTrtVersion("8.x.1").ok());
  EXPECT_FALSE(ParseTrtVersion("8.6.1.4").ok());
  EXPECT_FALSE(ParseTrtVersion("").ok());
  EXPECT_FALSE(ParseTrtVersion("8.12.0").ok());  // cannot be encoded in a 4-digit header
  EXPECT_FALSE(ParseTrtCalibrator("EntropyCalibration").ok());  // unverified legacy name
}

TEST(WriteFileAtomic, LeavesNoPartialFileOnFailure) {
  const std::string dir = ::testing::TempDir() + "/ro_dir_qk";
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  Status st = WriteFileAtomic(dir + "/out.cache", "x");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  if (::geteuid() != 0) {  // root ignores directory permissions
    EXPECT_FALSE(st.ok());
    EXPECT_FALSE(std::filesystem::exists(dir + "/out.cache"));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos);
  }
}

}  // namespace
}  // namespace quantkit::formats
