// Property of passes::ApplyPlan, the only plan -> Q/DQ code: for every zoo model x {calibrated
// plan, plan extracted from a Q/DQ model, plan read back from a TensorRT cache} x placement
// {tensorrt, plan, auto} x float_nodes {none, two layers}, the Q/DQ model a user exports
// (ApplyPlan -> ONNX bytes -> import) and the model the INT8 simulation runs
// (analysis::BuildSimulationModel: ApplyPlan + weight Q/DQ folded) give identical outputs on a
// batch, and no float-kept node reads a DequantizeLinear.
//
// Without the single ApplyPlan, `convert --placement plan` exported Q/DQ in front of
// float-kept nodes that `eval --plan` simulated in float: the float_nodes cases catch that.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "common/check.h"
#include "formats/trt_cache.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "passes/apply_plan.h"
#include "pipelines/calibration_steps.h"
#include "runtime/interpreter.h"

namespace quantkit {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kSeed = 1414;
constexpr int64_t kBatch = 2;

std::string Zoo(const std::string& name) {
  return std::string(QK_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

// One batch of uniform [0, 1) inputs for every model input (the zoo takes images).
data::Batch MakeBatch(const ir::Model& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  data::Batch batch;
  batch.size = kBatch;
  for (const data::InputSpec& spec : data::ModelInputs(model)) {
    std::vector<int64_t> dims = spec.dims;
    dims[0] = kBatch;
    int64_t n = 1;
    for (int64_t& d : dims) n *= (d = d < 0 ? kBatch : d);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = u(rng);
    batch.inputs.emplace_back(spec.name, ir::Tensor::FromVector(ir::DType::kFloat, dims, values));
  }
  return batch;
}

Result<std::vector<runtime::NamedTensor>> RunModel(ir::Model model, const data::Batch& batch) {
  QK_ASSIGN_OR_RETURN(auto interpreter, runtime::Interpreter::Create(std::move(model)));
  std::vector<runtime::NamedTensor> feeds;
  for (const auto& [name, tensor] : batch.inputs) feeds.push_back({name, tensor});
  return interpreter->Run(feeds);
}

// The model a user exports: ApplyPlan on the float model, serialized and imported again.
Result<ir::Model> Exported(const std::string& path, quant::QuantPlan plan,
                           const passes::ApplyPlanOptions& options, passes::PassReport* report) {
  QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(path));
  QK_ASSIGN_OR_RETURN(*report, passes::RunPass(model, passes::ApplyPlan(&plan, options)));
  QK_ASSIGN_OR_RETURN(std::string bytes, onnx_io::ExportModelToBytes(model));
  return onnx_io::ImportModelFromBytes(bytes.data(), bytes.size());
}

struct NamedPlan {
  std::string name;
  quant::QuantPlan plan;
};

// Calibrated (max, one batch), extracted from the calibrated Q/DQ model, and read from a cache.
std::vector<NamedPlan> PlansFor(const std::string& path, const data::Batch& batch,
                                const fs::path& dir) {
  std::vector<NamedPlan> plans;
  auto model = pipelines::LoadFloatModel(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto sites = pipelines::FindCalibrationSites(*model, {});
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  bool given = false;
  analysis::BatchReader once = [&]() -> Result<std::optional<data::Batch>> {
    if (given) return std::optional<data::Batch>();
    given = true;
    return std::optional<data::Batch>(batch);
  };
  analysis::PassOptions pass;
  pass.progress = false;
  auto stats = pipelines::CollectStatistics(*model, once, kBatch, *sites, pass);
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  auto built = pipelines::BuildPlan(*stats, *model, *sites, {});
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  plans.push_back({"calibrated", built->plan});

  passes::PassReport report;
  passes::ApplyPlanOptions trt;
  trt.mode = passes::PlacementPolicy::kTensorRT;
  auto qdq = Exported(path, built->plan, trt, &report);
  EXPECT_TRUE(qdq.ok()) << qdq.status().ToString();
  const std::string qdq_path = (dir / "calibrated.qdq.onnx").string();
  EXPECT_TRUE(onnx_io::ExportModel(*qdq, qdq_path).ok());
  auto extracted = analysis::ReadPlanFile(qdq_path);
  EXPECT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_TRUE(passes::PlanFromQdqModel(*extracted));
  plans.push_back({"qdq-extracted", *extracted});

  const std::string cache_path = (dir / "calibrated.cache").string();
  EXPECT_TRUE(formats::WriteTrtCache(cache_path, built->plan, {}).ok());
  auto cached = analysis::ReadPlanFile(cache_path);
  EXPECT_TRUE(cached.ok()) << cached.status().ToString();
  plans.push_back({"cache", *cached});
  return plans;
}

// Two named nodes that read a quantized tensor under TensorRT placement (fallback candidates).
std::vector<std::string> TwoLayers(const std::string& path, const quant::QuantPlan& plan) {
  auto model = analysis::LoadModelForQuantization(path);
  EXPECT_TRUE(model.ok());
  passes::ApplyPlanOptions trt;
  trt.mode = passes::PlacementPolicy::kTensorRT;
  auto sites = passes::PlanSites(*model->graph, plan, trt);
  EXPECT_TRUE(sites.ok());
  std::vector<std::string> layers;
  for (const passes::QdqSite& s : *sites) {
    const quant::TensorQuant* t = plan.Find(s.tensor);
    if (!t || !t->quantized || s.consumer->name.empty()) continue;
    if (std::find(layers.begin(), layers.end(), s.consumer->name) == layers.end())
      layers.push_back(s.consumer->name);
    if (layers.size() == 2) break;
  }
  return layers;
}

class ApplyPlanProperty : public testing::TestWithParam<std::string> {};

TEST_P(ApplyPlanProperty, ExportedAndSimulatedModelsAgree) {
  const std::string path = Zoo(GetParam());
  if (!fs::exists(path)) GTEST_SKIP() << path << " missing";
  SCOPED_TRACE(testing::Message() << GetParam() << ", seed " << kSeed);
  const fs::path dir = fs::path(testing::TempDir()) / ("qk_apply_plan_" + GetParam());
  fs::create_directories(dir);
  auto float_model = analysis::LoadModelForQuantization(path);
  ASSERT_TRUE(float_model.ok()) << float_model.status().ToString();
  const data::Batch batch = MakeBatch(*float_model, kSeed);

  int compared = 0, with_pairs = 0;
  for (NamedPlan& named : PlansFor(path, batch, dir)) {
    const std::vector<std::string> layers = TwoLayers(path, named.plan);
    ASSERT_EQ(layers.size(), 2u) << named.name;
    for (bool with_float : {false, true}) {
      quant::QuantPlan plan = named.plan;
      if (with_float) {
        for (const std::string& n : layers) plan.float_nodes[n] = "property test";
      }
      for (auto mode : {passes::PlacementPolicy::kTensorRT, passes::PlacementPolicy::kPlan,
                        passes::PlacementPolicy::kAuto}) {
        SCOPED_TRACE(testing::Message() << named.name << ", placement " << static_cast<int>(mode)
                                        << (with_float ? ", two float layers" : ""));
        passes::ApplyPlanOptions options;
        options.mode = mode;
        passes::PassReport report;
        auto exported = Exported(path, plan, options, &report);
        ASSERT_TRUE(exported.ok()) << exported.status().ToString();
        with_pairs += report.Count(passes::counter::kActivationPairs) > 0;
        // Float-kept nodes read no DequantizeLinear output in the exported model.
        for (const ir::Node* n : exported->graph->nodes()) {
          if (!plan.float_nodes.count(n->name)) continue;
          for (const ir::Value* in : n->inputs()) {
            const bool from_dq =
                in && in->producer() && in->producer()->op_type() == "DequantizeLinear";
            EXPECT_FALSE(from_dq) << "float-kept node '" << n->name << "' reads " << in->name();
          }
        }
        auto simulated = analysis::BuildSimulationModel(path, plan, options);
        ASSERT_TRUE(simulated.ok()) << simulated.status().ToString();
        auto a = RunModel(std::move(*exported), batch);
        auto b = RunModel(std::move(*simulated), batch);
        ASSERT_TRUE(a.ok()) << a.status().ToString();
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        ASSERT_EQ(a->size(), b->size());
        for (size_t o = 0; o < a->size(); ++o) {
          const ir::Tensor& x = (*a)[o].tensor;
          const ir::Tensor& y = (*b)[o].tensor;
          ASSERT_EQ(x.dims(), y.dims());
          ASSERT_EQ(x.dtype(), ir::DType::kFloat);
          int64_t differ = 0;
          for (int64_t i = 0; i < x.numel(); ++i)
            differ += x.data_as<float>()[i] != y.data_as<float>()[i];
          // Identical, not close: both are the same Q/DQ graph; folding computes the weights'
          // fake quantization with the same float32 formula the Q/DQ kernels use.
          EXPECT_EQ(differ, 0) << "output '" << (*a)[o].name << "': " << differ << " of "
                               << x.numel() << " values differ";
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18);
  EXPECT_GE(with_pairs, 8);  // the comparisons are not between two float models
}

INSTANTIATE_TEST_SUITE_P(Zoo, ApplyPlanProperty,
                         testing::Values("plain_cnn", "resnet_small", "mobilenetv2_small",
                                         "efficientnet_small", "vit_tiny"));

}  // namespace
}  // namespace quantkit
