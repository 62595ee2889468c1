// `--device` end to end on a machine without a GPU (CI): CUDA asked for is exit 3 with one line
// saying why (plain `cuda` under a distributed launch naming the GPU of LOCAL_RANK), a malformed
// device is exit 2, subcommands that run no model do not take the
// option, and calibration statistics computed by the device algorithm (on the CPU, via
// QUANTKIT_DEVICE_STATS=1) are byte-identical to the host collectors' .qkstats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/file_util.h"
#include "runtime/device.h"
#include "testing/cli_run.h"

namespace quantkit {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

class CliDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_device_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  testing::CommandResult Run(const std::string& args, const std::string& env = "") const {
    return testing::RunQuantkit(QK_QUANTKIT_BIN, args, dir_, env);
  }
  static void ExpectOneLine(const testing::CommandResult& r) {
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  }
  std::string dir_;
};

TEST_F(CliDevice, CudaWithoutAGpuExits3OnEveryModelCommand) {
  if (runtime::CudaDeviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is visible (tests/cuda covers it)";
  const std::string data = " --data fashion-mnist:calib --samples 8";
  for (const std::string& args :
       {"calibrate " + kModel + data + " -o " + dir_ + "/out", "eval " + kModel + data,
        "diagnose " + kModel + data + " -o " + dir_ + "/diag",
        "qat " + kModel + " --data fashion-mnist:calib --steps 1 -o " + dir_ + "/qat",
        "run " + kModel + " --input input=" + dir_ + "/missing.npy"}) {
    const testing::CommandResult r = Run(args + " --device cuda");
    EXPECT_EQ(r.exit_code, 3) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("--device cuda:0"), std::string::npos) << r.err;
    ExpectOneLine(r);
  }
  // No partial output: the device is checked before anything is written.
  EXPECT_NE(access((dir_ + "/out").c_str(), F_OK), 0);
  EXPECT_NE(access((dir_ + "/qat").c_str(), F_OK), 0);
  // The environment variable is the same option.
  const testing::CommandResult env = Run("eval " + kModel + data, "QUANTKIT_DEVICE=cuda:1");
  EXPECT_EQ(env.exit_code, 3) << env.err;
  EXPECT_NE(env.err.find("--device cuda:1"), std::string::npos) << env.err;
}

// Under torchrun, plain `cuda` is this rank's GPU (LOCAL_RANK), named in the error; an explicit
// ordinal is kept. Without the mapping every rank of a node would share GPU 0. The device is
// checked before the rendezvous, so no other rank (and no store at MASTER_PORT) is needed.
TEST_F(CliDevice, DistributedLaunchPicksTheGpuOfLocalRank) {
  if (runtime::CudaDeviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is visible (tests/cuda covers it)";
  const std::string launch =
      "RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1";
  const std::string eval =
      "eval " + kModel + " --data fashion-mnist:calib --samples 8 --dist-timeout 5";
  const testing::CommandResult plain = Run(eval + " --device cuda", launch);
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_NE(plain.err.find("--device cuda:1"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("LOCAL_RANK=1"), std::string::npos) << plain.err;
  ExpectOneLine(plain);
  const testing::CommandResult fixed = Run(eval + " --device cuda:0", launch);
  EXPECT_EQ(fixed.exit_code, 3) << fixed.err;
  EXPECT_NE(fixed.err.find("--device cuda:0"), std::string::npos) << fixed.err;
  EXPECT_EQ(fixed.err.find("LOCAL_RANK"), std::string::npos) << fixed.err;
}

TEST_F(CliDevice, MalformedDeviceExits2AndOtherCommandsRejectTheOption) {
  const testing::CommandResult bad =
      Run("eval " + kModel + " --data fashion-mnist:calib --device gpu0");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("'gpu0' is not a device"), std::string::npos) << bad.err;
  ExpectOneLine(bad);
  // lint runs no model: --device there would be silently ignored, so it is not an option.
  const testing::CommandResult lint = Run("lint " + kModel + " --device cpu");
  EXPECT_NE(lint.exit_code, 0) << lint.out;
}

TEST_F(CliDevice, DeviceStatisticsAlgorithmWritesTheSameQkstats) {
  const std::string common = "calibrate " + kModel +
                             " --data fashion-mnist:calib --samples 80 --batch-size 32 -q --stats ";
  const testing::CommandResult host = Run(common + dir_ + "/host.qkstats --device cpu");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  const testing::CommandResult dev =
      Run(common + dir_ + "/device.qkstats", "QUANTKIT_DEVICE_STATS=1");
  ASSERT_EQ(dev.exit_code, 0) << dev.err;
  auto a = ReadFileToString(dir_ + "/host.qkstats");
  auto b = ReadFileToString(dir_ + "/device.qkstats");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_GT(a->size(), 1000u);
  EXPECT_TRUE(*a == *b) << "the device algorithm's statistics differ from the host collectors'";
}

// The max-only fast path keeps range statistics only; the device algorithm must then compute no
// histogram and merge into the range-only collectors (on a GPU this failed with "cannot merge
// range-only statistics with statistics that have a histogram").
TEST_F(CliDevice, DeviceStatisticsAlgorithmOnTheMaxOnlyPathWritesTheSameCache) {
  const std::string common =
      "calibrate " + kModel +
      " --data fashion-mnist:calib --samples 80 --batch-size 32 -q --method max -o ";
  const testing::CommandResult host = Run(common + dir_ + "/host --device cpu");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  const testing::CommandResult dev = Run(common + dir_ + "/device", "QUANTKIT_DEVICE_STATS=1");
  ASSERT_EQ(dev.exit_code, 0) << dev.err;
  for (const char* file : {"/calib.cache", "/model.qdq.onnx"}) {
    auto a = ReadFileToString(dir_ + "/host" + file);
    auto b = ReadFileToString(dir_ + "/device" + file);
    ASSERT_TRUE(a.ok() && b.ok()) << file;
    ASSERT_GT(a->size(), 100u) << file;
    EXPECT_TRUE(*a == *b) << file
                          << " differs between the device algorithm and the host collectors";
  }
}

}  // namespace
}  // namespace quantkit
