// The ONNX backend node-test suites through importer + interpreter. One test per suite; each
// prints "N passed, M failed, K skipped" and fails if any case that is not in skips.jsonc fails.
//   QK_CONFORMANCE_FILTER=substring   run only matching cases
//   QK_CONFORMANCE_VERBOSE=1          also list passing-suite details
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

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

void RunAndReport(const std::string& root, const std::string& skip_file, double atol) {
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " not installed";
  std::vector<SkipRule> skips;
  std::string error;
  ASSERT_TRUE(LoadSkips(skip_file, &skips, &error)) << error;
  SuiteOptions opt;
  opt.rtol = kNodeTestRtol;
  opt.atol = atol;
  opt.filter = Env("QK_CONFORMANCE_FILTER");
  SuiteResult r = RunSuite(root, skips, opt);
  for (const std::string& f : r.failures) std::printf("FAILED %s\n", f.c_str());
  std::printf("%s: %d passed, %d failed, %d skipped\n", root.c_str(), r.passed, r.failed, r.skipped);
  EXPECT_EQ(r.failed, 0);
}

std::string SkipFile(const char* name) {
  return std::string(QK_SOURCE_DIR) + "/tests/conformance/" + name;
}

TEST(Conformance, DebianNodeSuite) {
  RunAndReport(std::string(kDebianData) + "/node", SkipFile("skips.jsonc"), kNodeTestAtol);
}

TEST(Conformance, DebianPytorchConverted) {
  RunAndReport(std::string(kDebianData) + "/pytorch-converted", SkipFile("skips.jsonc"), kPytorchSuiteAtol);
}

TEST(Conformance, DebianPytorchOperator) {
  RunAndReport(std::string(kDebianData) + "/pytorch-operator", SkipFile("skips.jsonc"), kPytorchSuiteAtol);
}

// The newer suite shipped with the venv's PyPI onnx (more ops and opsets).
TEST(Conformance, PypiNodeSuite) {
  const fs::path lib = fs::path(QK_SOURCE_DIR) / ".venv" / "lib";
  std::string root;
  if (fs::is_directory(lib)) {
    for (const auto& e : fs::directory_iterator(lib)) {
      const fs::path p = e.path() / "site-packages/onnx/backend/test/data/node";
      if (fs::is_directory(p)) root = p.string();
    }
  }
  if (root.empty()) GTEST_SKIP() << "no .venv with the onnx package (run make setup)";
  RunAndReport(root, SkipFile("skips_pypi.jsonc"), kNodeTestAtol);
}

}  // namespace
}  // namespace quantkit::testing
