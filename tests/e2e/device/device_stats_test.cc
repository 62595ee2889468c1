// Calibration statistics computed by the device algorithm (runtime/tensor_stats.h, run on the
// CPU here: CalibrateOptions::device_stats_on_host) are byte-identical to the host collectors':
// the same .qkstats, and on the max-only path (range statistics only) the same cache and Q/DQ
// model. tests/cuda/ runs the comparison on a GPU. The switch is a test's option of the internal
// pipeline: neither the public API, the CLI nor the runtime's environment has it.
#include <gtest/gtest.h>

#include <string>

#include "common/file_util.h"
#include "pipelines/calibrate.h"
#include "quant/method.h"
#include "testing/text_models.h"

namespace quantkit::pipelines {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

CalibrateOptions Options() {
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.samples = 80;
  o.batch_size = 32;
  o.progress = false;
  return o;
}

std::string Read(const std::string& path) {
  Result<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << path;
  return bytes.ok() ? *bytes : std::string();
}

TEST(DeviceStatistics, TheDeviceAlgorithmWritesTheSameQkstats) {
  testing::TempDir dir;
  CalibrateOptions host = Options();
  host.stats_out = dir.File("host.qkstats");
  ASSERT_TRUE(Calibrate(host).ok());
  CalibrateOptions device = Options();
  device.stats_out = dir.File("device.qkstats");
  device.device_stats_on_host = true;
  Result<CalibrateResult> r = Calibrate(device);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string a = Read(host.stats_out), b = Read(device.stats_out);
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "the device algorithm's statistics differ from the host collectors'";
}

// The max-only fast path keeps range statistics only; the device algorithm must then compute no
// histogram and merge into the range-only collectors (on a GPU this failed with "cannot merge
// range-only statistics with statistics that have a histogram").
TEST(DeviceStatistics, TheDeviceAlgorithmOnTheMaxOnlyPathWritesTheSameCache) {
  testing::TempDir dir;
  CalibrateOptions host = Options();
  host.method = *quant::ParseMethod("max");
  host.output_dir = dir.File("host");
  ASSERT_TRUE(Calibrate(host).ok());
  CalibrateOptions device = host;
  device.output_dir = dir.File("device");
  device.device_stats_on_host = true;
  Result<CalibrateResult> r = Calibrate(device);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const char* file : {"/calib.cache", "/model.qdq.onnx"}) {
    const std::string a = Read(host.output_dir + file), b = Read(device.output_dir + file);
    ASSERT_GT(a.size(), 100u) << file;
    EXPECT_TRUE(a == b) << file << " differs between the device algorithm and the host collectors";
  }
}

}  // namespace
}  // namespace quantkit::pipelines
