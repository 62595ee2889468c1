// The fixture of the hostile-input suites (Hostile.*: issue #13 in hostile_input_test.cc, issue #27
// in hostile_round2_test.cc): a scratch directory with a small Conv model and its data, and
// ExpectFails, which runs the binary and checks everything ExpectCleanFailure checks plus an
// output directory left byte-for-byte as it was. Not in an anonymous namespace: both files of
// the test binary share this one class (gtest requires one fixture class per suite).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "testing/onnx_builders.h"

namespace quantkit::testing {

// x[N,1,4,4] -> Conv(W, pad 1) -> c -> Relu -> y: small enough for calibrate/eval in a second.
inline constexpr const char* kConvModel = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  net (float[N,1,4,4] x) => (float[N,2,4,4] y)
  <float[2,1,3,3] W = {1,0,-1,2,0,-2,1,0,-1, 0,1,0,1,-4,1,0,1,0}>
  {
    c = Conv <pads = [1,1,1,1], kernel_shape = [3,3]> (x, W)
    y = Relu(c)
  })";

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_hostile_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
    WriteAll(File("model.onnx"), ParseModelBytes(kConvModel));
    std::vector<double> values;
    for (int i = 0; i < 8 * 16; ++i) values.push_back((i % 7) * 0.25 - 0.5);
    WriteAll(File("x.npy"), NpyBytes({8, 1, 4, 4}, values));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  RunResult Run(const std::vector<std::string>& args) const { return RunQuantkit(args, dir_); }

  // Runs `args`, expecting a clean failure that names `names`, and that `out_dir` (when given)
  // is byte-for-byte what it was.
  RunResult ExpectFails(const std::vector<std::string>& args, const std::set<int>& codes,
                        const std::vector<std::string>& names,
                        const std::string& out_dir = "") const {
    const auto before = out_dir.empty() ? std::map<std::string, std::string>() : Snapshot(out_dir);
    const RunResult r = Run(args);
    std::string what;
    for (const auto& a : args) what += a + " ";
    ExpectCleanFailure(r, codes, names, what);
    if (!out_dir.empty()) {
      EXPECT_EQ(Snapshot(out_dir), before) << "output directory changed: " << what;
    }
    return r;
  }

  std::string dir_;
};

}  // namespace quantkit::testing
