// Import -> export must be lossless: for every model of the ONNX backend test data
// (node, pytorch-converted, pytorch-operator, simple), the re-serialized ModelProto equals the
// original after semantic normalisation (typed fields -> raw, see testing/onnx_compare.h).
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "onnx/export.h"
#include "onnx/import.h"
#include "onnx/inspect.h"
#include "testing/onnx_compare.h"

namespace quantkit::onnx_io {
namespace {

constexpr const char* kTestDataRoot = "/usr/share/libonnx-testdata/data";

std::vector<std::string> ModelsUnder(const std::string& suite) {
  std::vector<std::string> out;
  const std::string root = std::string(kTestDataRoot) + "/" + suite;
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = root + "/" + name + "/model.onnx";
    if (access(path.c_str(), R_OK) == 0) out.push_back(path);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

// Returns "" when `path` round-trips, else the reason.
std::string RoundTrip(const std::string& path) {
  ::onnx::ModelProto original;
  std::string error;
  if (!testing::LoadModelProto(path, &original, &error)) return error;
  auto model = ImportModel(path);
  if (!model.ok()) return "import: " + model.status().ToString();
  // What `quantkit inspect` prints must be consistent for every model: the op histogram counts
  // every node (subgraphs included) and the outputs match the file's.
  const ModelSummary summary = Summarize(*model);
  int64_t histogram_total = 0;
  for (const auto& [op, n] : summary.op_histogram) histogram_total += n;
  if (histogram_total != summary.num_nodes || summary.num_nodes < original.graph().node_size() ||
      static_cast<int>(summary.outputs.size()) != original.graph().output_size()) {
    return "inspect summary inconsistent";
  }
  auto bytes = ExportModelToBytes(*model);
  if (!bytes.ok()) return "export: " + bytes.status().ToString();
  ::onnx::ModelProto exported;
  if (!exported.ParseFromString(*bytes)) return "exported bytes do not parse";
  const std::string dir = path.substr(0, path.find_last_of('/'));
  std::string norm = testing::NormalizeModel(&original, dir);
  norm += testing::NormalizeModel(&exported, dir);
  if (!norm.empty()) return "normalise: " + norm;
  return testing::FirstDifference(original, exported);
}

class RoundTripSuite : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTripSuite, EveryModelRoundTripsLosslesslyAndInspects) {
  const std::vector<std::string> models = ModelsUnder(GetParam());
  // scripts/setup.sh installs libonnx-testdata: an empty suite is a broken setup, not a skip.
  ASSERT_FALSE(models.empty()) << "libonnx-testdata not installed under " << kTestDataRoot;
  int failures = 0;
  for (const std::string& path : models) {
    const std::string diff = RoundTrip(path);
    if (!diff.empty()) {
      ++failures;
      ADD_FAILURE() << path << ": " << diff;
      if (failures >= 20) break;  // enough to diagnose; keeps the log readable
    }
  }
  std::printf("%s: %zu models, %d failures\n", GetParam(), models.size(), failures);
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, RoundTripSuite,
                         ::testing::Values("node", "pytorch-converted", "pytorch-operator",
                                           "simple"));

}  // namespace
}  // namespace quantkit::onnx_io
