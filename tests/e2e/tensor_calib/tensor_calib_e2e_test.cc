// End to end: TV2 written as .npy, `quantkit tensor-calib --json` must print the
// pytorch-quantization numbers of tv2_expected.json (and fail cleanly on bad input).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "data/npy.h"
#include "testing/testvectors.h"

namespace quantkit {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun Quantkit(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(QK_QUANTKIT_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string WriteTv2(const std::string& dir, std::vector<int64_t> dims, const std::string& name) {
  const std::vector<float> data = testing::LoadF32(dir + "/tv2.f32le.bin");
  EXPECT_EQ(data.size(), 100000u);
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(data::WriteNpy(path, ir::Tensor::FromVector(ir::DType::kFloat, dims, data)).ok());
  return path;
}

TEST(TensorCalibCli, ReproducesThePytorchQuantizationNumbersForTv2) {
  const std::string dir = testing::FindTestVectorsDir();
  ASSERT_FALSE(dir.empty()) << "calibration test vectors not found (QK_TESTVECTORS_DIR)";
  const nlohmann::json expected = testing::LoadJson(dir + "/tv2_expected.json");
  ASSERT_FALSE(expected.is_discarded());
  const nlohmann::json& pq = expected["one_shot"]["pytorch_quantization"];
  const std::string path = WriteTv2(dir, {250, 400}, "tv2_cli.npy");
  const CliRun r =
      Quantkit("tensor-calib " + path + " --json --method all,percentile:99.9,percentile:99.999");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["shape"], nlohmann::json({250, 400}));
  EXPECT_EQ(j["range"]["zeros"], 5);
  EXPECT_EQ(j["histogram"]["nonempty_bins"], 738);  // tv2_input.json check value
  std::map<std::string, std::string> want = {
      {"max", expected["one_shot"]["max_abs"]["amax"]["f32_hex"]},
      {"entropy", pq["entropy"]["amax"]["f32_hex"]},
      {"percentile:99.99", pq["percentile_99.99"]["amax"]["f32_hex"]},
      {"percentile:99.9", pq["percentile_99.9"]["amax"]["f32_hex"]},
      {"percentile:99.999", pq["percentile_99.999"]["amax"]["f32_hex"]},
      {"mse", pq["mse"]["amax"]["f32_hex"]},
  };
  ASSERT_EQ(j["methods"].size(), want.size());
  for (const auto& m : j["methods"]) {
    const std::string name = m["method"];
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_EQ(testing::HexOfFloat(m["amax"].get<float>()), want[name]) << name;
  }
  // Text mode names the methods too.
  const CliRun text = Quantkit("tensor-calib " + path + " --method entropy");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("entropy            7.5"), std::string::npos) << text.out;
  std::remove(path.c_str());
}

TEST(TensorCalibCli, FailsWithOneLineErrors) {
  CliRun r = Quantkit("tensor-calib /nonexistent/x.npy");
  EXPECT_EQ(r.exit_code, ExitCodeFor(StatusCode::kNotFound));
  EXPECT_NE(r.out.find("/nonexistent/x.npy"), std::string::npos) << r.out;
  const std::string bad = ::testing::TempDir() + "/not_npy.npy";
  FILE* f = std::fopen(bad.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("hello", f);
  std::fclose(f);
  r = Quantkit("tensor-calib " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("not_npy.npy: not a .npy file"), std::string::npos) << r.out;
  r = Quantkit("tensor-calib " + bad + " --method percentile:abc");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("bad percentile"), std::string::npos) << r.out;
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace quantkit
