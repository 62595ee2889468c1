// The one writer of a quantized model's files (pipelines/quantized_artifacts.h): calibrate and the
// public WriteArtifacts write the same bytes for the same plan, the float model of a PTQ stage
// included, and a writer asked for the model alone writes nothing else.
#include "pipelines/quantized_artifacts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "analysis/model_loading.h"
#include "formats/ranges.h"
#include "pipelines/calibrate/calibrate.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/ptq/stages.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

struct TempDir {
  TempDir() {
    std::string templ = fs::temp_directory_path().string() + "/qk_artifacts_XXXXXX";
    path = mkdtemp(templ.data());
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

std::string Bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << p;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CalibrateOptions Options() {
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.samples = 16;
  o.progress = false;
  o.check.samples = 0;  // the held-out check reads more data; the files do not depend on it
  auto stages = ParsePtqStages("bias-correction");  // changes weights: model.float.onnx too
  EXPECT_TRUE(stages.ok());
  o.ptq.stages = *stages;
  o.ptq.samples = 8;
  o.ptq.batch = 8;
  return o;
}

TEST(QuantizedArtifacts, CalibrateAndWriteArtifactsWriteTheSameFilesForThePlan) {
  TempDir tmp;
  CalibrateOptions options = Options();
  auto prepared = PrepareCalibration(options);
  if (!prepared.ok() && prepared.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << prepared.status().message();
  }
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  // The plan alone (no output directory), then the public writer; and calibrate writing itself.
  auto planned = FinishCalibration(options, *prepared);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_FALSE(planned->plan.initializers.empty()) << "bias correction changed no weight";
  auto artifacts =
      WriteArtifacts(prepared->model, planned->plan, options.placement,
                     (tmp.path / "public").string(), options.cache, options.weight_storage);
  ASSERT_TRUE(artifacts.ok()) << artifacts.status().ToString();
  options.output_dir = (tmp.path / "calibrate").string();
  auto calibrated = Calibrate(options);
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().ToString();
  for (const char* file :
       {"model.qdq.onnx", "model.float.onnx", "calib.cache", "ranges.txt", "plan.json"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(Bytes(tmp.path / "public" / file), Bytes(tmp.path / "calibrate" / file));
  }
  // The plan written names the float model written, and holds the weight entries ApplyPlan filled.
  auto written = formats::ReadPlanJson((tmp.path / "calibrate" / "plan.json").string());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_FALSE(written->provenance.float_model_sha256.empty());
  size_t weights_before = 0, weights_after = 0;
  for (const auto& [name, t] : planned->plan.tensors)
    weights_before += t.role == quant::TensorRole::kWeight;
  for (const auto& [name, t] : written->tensors)
    weights_after += t.role == quant::TensorRole::kWeight;
  EXPECT_GE(weights_after, weights_before);
  EXPECT_GT(weights_after, 0u);
}

TEST(QuantizedArtifacts, TheModelAloneWritesNoPlanFiles) {
  TempDir tmp;
  quant::QuantPlan plan;  // no entries: weights get per-channel max scales from ApplyPlan
  auto model = analysis::LoadModelForQuantization(kModel);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  QuantizedFiles files;
  files.model_name = "only.onnx";
  files.implicit_int8 = files.plan_json = false;
  auto set = ArtifactSet::Open(tmp.path.string(), {files.model_name});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  passes::ApplyPlanOptions apply;
  apply.weight_storage = passes::WeightStorage::kInt8;
  auto inserted = StageQuantizedModel(std::move(*model), apply, &plan, files, set->get());
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  auto committed = (*set)->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"only.onnx"});
  EXPECT_FALSE(plan.tensors.empty()) << "ApplyPlan fills the weight entries into the caller's plan";
}

}  // namespace
}  // namespace quantkit::pipelines
