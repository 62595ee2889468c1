// `quantkit --profile FILE` (runtime/profiler.h): a Chrome trace of the whole command with the
// ATen ops, one scope per model node and the observers' scopes; the command's results do not
// change; an unwritable path is bad input before any work. Runs on Debian's libtorch (no
// libkineto: the trace is written from the event list) and on PyPI's (Kineto's own writer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/file_util.h"
#include "testing/cli_run.h"

namespace quantkit {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";
const std::string kData = " --data fashion-mnist:calib --samples 8 --method max";

class CliProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_profile_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  testing::CommandResult Run(const std::string& args, const std::string& env = "") const {
    return testing::RunQuantkit(QK_QUANTKIT_BIN, args, dir_, env);
  }
  std::string Read(const std::string& name) const {
    Result<std::string> text = ReadFileToString(dir_ + "/" + name);
    EXPECT_TRUE(text.ok()) << name;
    return text.ok() ? text.value() : std::string();
  }
  std::string dir_;
};

TEST_F(CliProfile, TraceHoldsTheNodesOpsAndObserversAndChangesNoResult) {
  const testing::CommandResult plain =
      Run("calibrate " + kModel + kData + " -o " + dir_ + "/plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const testing::CommandResult r = Run("calibrate " + kModel + kData + " -o " + dir_ +
                                       "/profiled --profile " + dir_ + "/trace.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("profile written to " + dir_ + "/trace.json"), std::string::npos) << r.err;
  EXPECT_EQ(Read("profiled/calib.cache"), Read("plain/calib.cache"));
  EXPECT_EQ(Read("profiled/model.qdq.onnx"), Read("plain/model.qdq.onnx"));

  const nlohmann::json trace =
      nlohmann::json::parse(Read("trace.json"), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(trace.is_object() && trace.contains("traceEvents")) << "not a Chrome trace";
  std::set<std::string> nodes;
  int observe = 0, aten = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!e.contains("name") || !e["name"].is_string()) continue;
    const std::string name = e["name"];
    if (name.find("(Conv, opset") != std::string::npos ||
        name.find("(Gemm, opset") != std::string::npos) {
      nodes.insert(name);
    }
    observe += name == "qk::observe";
    aten += name.rfind("aten::", 0) == 0;
  }
  // plain_cnn's Conv and Gemm nodes, each under its own scope; 8 samples are at least one run.
  EXPECT_GE(nodes.size(), 3u);
  EXPECT_GT(observe, 0);
  EXPECT_GT(aten, 0);
}

TEST_F(CliProfile, EnvironmentVariableIsTheSameOption) {
  const testing::CommandResult r = Run("eval " + kModel + " --data fashion-mnist:calib --samples 8",
                                       "QUANTKIT_PROFILE=" + dir_ + "/env.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(Read("env.json"), nullptr, false).contains("traceEvents"));
}

TEST_F(CliProfile, UnwritablePathIsBadInputBeforeAnyWork) {
  const testing::CommandResult r = Run("calibrate " + kModel + kData + " -o " + dir_ +
                                       "/out --profile " + dir_ + "/no/such/dir/trace.json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(dir_ + "/no/such/dir/trace.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(access((dir_ + "/out").c_str(), F_OK), 0)
      << "outputs written although the profile path is bad";
}

}  // namespace
}  // namespace quantkit
