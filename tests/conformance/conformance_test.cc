// The ONNX backend node-test suites through importer + interpreter. One test per suite; each
// prints "N passed, M failed, K skipped" and fails if any case that is not in skips.jsonc fails.
// Device parity (issue 26, in the spirit of ggml's test-backend-ops): every case that ran on the
// CPU runs again on each other device and is compared with the CPU's outputs; each suite prints
// "932 node cases on cuda:0: N equal, M within tolerance, 0 failing" and fails on any failing.
// The devices: every visible CUDA device, and the emulated device (tests/testing/
// emulated_device.h), which checks on CPU-only machines that kernels keep to their inputs' device.
//   QK_CONFORMANCE_FILTER=substring   run only matching cases
//   QK_CONFORMANCE_VERBOSE=1          also list passing-suite details
//   QK_PARITY_DEVICES=cuda:0,emulated the devices to compare (default: every CUDA device and
//                                     emulated; "none": the CPU only)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "conformance/parity_devices.h"
#include "conformance/runner.h"
#include "testing/tolerances.h"

namespace quantkit::testing {
namespace {

namespace fs = std::filesystem;

const char kDebianData[] = "/usr/share/libonnx-testdata/data";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

void RunAndReport(const std::string& root, const std::string& skip_file, double atol,
                  const char* what) {
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " not installed";
  std::vector<SkipRule> skips;
  std::string error;
  ASSERT_TRUE(LoadSkips(skip_file, &skips, &error)) << error;
  SuiteOptions opt;
  opt.rtol = kNodeTestRtol;
  opt.atol = atol;
  opt.filter = Env("QK_CONFORMANCE_FILTER");
  auto devices = ParityDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  opt.devices = *devices;
  SuiteResult r = RunSuite(root, skips, opt);
  for (const std::string& f : r.failures) std::printf("FAILED %s\n", f.c_str());
  std::printf("%s: %d passed, %d failed, %d skipped\n", root.c_str(), r.passed, r.failed,
              r.skipped);
  for (const DeviceParity& p : r.parity) {
    for (const std::string& f : p.failures)
      std::printf("PARITY FAILED %s %s\n", p.device.c_str(), f.c_str());
    std::printf("%s\n", p.Summary(what).c_str());
    EXPECT_EQ(p.failing, 0) << p.device;
  }
  EXPECT_EQ(r.failed, 0);
}

std::string SkipFile(const char* name) {
  return std::string(QK_SOURCE_DIR) + "/tests/conformance/" + name;
}

TEST(Conformance, DebianNodeSuite) {
  RunAndReport(std::string(kDebianData) + "/node", SkipFile("skips.jsonc"), kNodeTestAtol,
               "node cases (Debian onnx)");
}

TEST(Conformance, DebianPytorchConverted) {
  RunAndReport(std::string(kDebianData) + "/pytorch-converted", SkipFile("skips.jsonc"),
               kPytorchSuiteAtol, "pytorch-converted cases");
}

TEST(Conformance, DebianPytorchOperator) {
  RunAndReport(std::string(kDebianData) + "/pytorch-operator", SkipFile("skips.jsonc"),
               kPytorchSuiteAtol, "pytorch-operator cases");
}

// The newer suite shipped with the venv's PyPI onnx (more ops and opsets); QK_ONNX_NODE_DATA names
// another copy (scripts/gpu_machine.sh: the GPU machine's own onnx, which has no .venv).
TEST(Conformance, PypiNodeSuite) {
  const fs::path lib = fs::path(QK_SOURCE_DIR) / ".venv" / "lib";
  std::string root;
  if (const char* env = std::getenv("QK_ONNX_NODE_DATA"); env != nullptr && *env != '\0') {
    if (!fs::is_directory(env))
      GTEST_FAIL() << "QK_ONNX_NODE_DATA=" << env << " is not a directory";
    root = env;
  } else if (fs::is_directory(lib)) {
    for (const auto& e : fs::directory_iterator(lib)) {
      const fs::path p = e.path() / "site-packages/onnx/backend/test/data/node";
      if (fs::is_directory(p)) root = p.string();
    }
  }
  if (root.empty()) GTEST_SKIP() << "no .venv with the onnx package (run make setup)";
  RunAndReport(root, SkipFile("skips_pypi.jsonc"), kNodeTestAtol, "node cases (PyPI onnx)");
}

}  // namespace
}  // namespace quantkit::testing
