// The PTQ stage framework (pipelines/ptq/stages.h): the --ptq syntax and its checks, the per-layer
// input cache against full model runs, and calibrate --ptq writing what the stages chose into every
// artifact (Q/DQ model, float model for the cache, plan provenance), deterministically.
#include "pipelines/ptq/stages.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <cmath>
#include <filesystem>

#include "analysis/layer_cache.h"
#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "formats/ranges.h"
#include "ir/float16.h"
#include "onnx/import.h"
#include "passes/apply_plan.h"
#include "pipelines/calibrate/calibrate.h"
#include "runtime/interpreter.h"
#include "testing/tolerances.h"

namespace quantkit::pipelines {
namespace {

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

// A fresh directory, removed with its contents at the end of the scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = std::filesystem::temp_directory_path().string() + "/qk_ptq_XXXXXX";
    path_ = mkdtemp(&templ[0]) ? templ : std::string();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST(ParsePtqStages, DefaultsOrderAndLabels) {
  auto s = ParsePtqStages("seqmse,adaround:iterations=500:reg=0.02");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].kind, PtqStageKind::kSeqMse);
  EXPECT_EQ((*s)[0].Get("candidates"), 20);
  EXPECT_EQ((*s)[1].Get("iterations"), 500);
  EXPECT_EQ((*s)[1].Get("reg"), 0.02);
  EXPECT_EQ((*s)[1].Get("beta_start"), 20);  // a default kept
  EXPECT_EQ((*s)[0].Label(), "seqmse(candidates=20)");
  EXPECT_EQ((*s)[1].Label(),
            "adaround(iterations=500,reg=0.02,beta_start=20,beta_end=2,warm_start=0.2,lr=0.001)");
  EXPECT_EQ(PtqStagesText(*s), "seqmse,adaround");
  auto all = ParsePtqStages("seqmse,adaround,bias-correction");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->back().kind, PtqStageKind::kBiasCorrection);
  EXPECT_EQ(all->back().Label(), "bias-correction");  // no parameters
  auto smooth = ParsePtqStages("smoothquant,seqmse,adaround,bias-correction");
  ASSERT_TRUE(smooth.ok()) << smooth.status().ToString();
  EXPECT_EQ(smooth->front().kind, PtqStageKind::kSmoothQuant);
  EXPECT_EQ(smooth->front().Label(), "smoothquant(alpha=auto)");  // chosen on held-out data
  auto given = ParsePtqStages("smoothquant:alpha=0.5");
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->front().Get("alpha"), 0.5);
  EXPECT_EQ(given->front().Label(), "smoothquant(alpha=0.5)");
  auto none = ParsePtqStages("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParsePtqStages, EveryMistakeIsOneClearError) {
  // Each would otherwise run something the user did not ask for.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"adaroud", "unknown stage 'adaroud'"},
      {"adaround:iters=5", "'iters=5' is not KEY=VALUE with a parameter of adaround"},
      {"adaround:iterations", "is not KEY=VALUE"},
      {"adaround:iterations=many", "'many' is not a number"},
      {"adaround:iterations=0", "out of range"},
      {"adaround:iterations=2.5", "want an integer"},
      {"adaround:reg=-1", "out of range"},
      {"seqmse:candidates=1e9", "out of range"},
      {"adaround,adaround", "given twice"},
      {"adaround,seqmse", "seqmse must come before adaround"},
      {"adaround:beta_start=2:beta_end=20", "beta_end"},
      {"seqmse,", "unknown stage ''"},
      {"bias-correction,seqmse", "bias-correction must come last"},
      {"bias-correction,adaround", "give it after adaround"},
      {"bias-correction:samples=4", "is not KEY=VALUE with a parameter of bias-correction"},
      {"smoothquant:alpha=1.5", "out of range"},
      {"smoothquant:alpha=-1", "out of range"},  // "auto" is the default, not a value to give
      {"seqmse,smoothquant", "smoothquant must come first"},
      {"smoothquant,smoothquant", "given twice"},
  };
  for (const auto& [text, expected] : cases) {
    SCOPED_TRACE(text);
    auto s = ParsePtqStages(text);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(expected), std::string::npos) << s.status().message();
  }
  EXPECT_NE(ParsePtqStages("adaroud").status().message().find("adaround"), std::string::npos)
      << "the closest name is suggested";
}

TEST(PtqOptions, RangeChecked) {
  PtqOptions o;
  EXPECT_TRUE(CheckPtqOptions(o).ok());
  o.samples = 0;
  EXPECT_FALSE(CheckPtqOptions(o).ok());
  o = PtqOptions{};
  o.batch = -1;
  EXPECT_FALSE(CheckPtqOptions(o).ok());
  o = PtqOptions{};
  o.memory_bytes = 1000;
  EXPECT_FALSE(CheckPtqOptions(o).ok());
}

// The FP32 model's value of `name` on `batch`, from a full run that also outputs it.
ir::Tensor FullRunValue(const std::string& path, const data::Batch& batch,
                        const std::string& name) {
  auto m = analysis::LoadModelForQuantization(path);
  EXPECT_TRUE(m.ok());
  m->graph->AddOutput(m->graph->FindValue(name));
  auto interp = runtime::Interpreter::Create(std::move(*m));
  EXPECT_TRUE(interp.ok());
  std::vector<runtime::NamedTensor> feeds;
  for (const auto& [n, t] : batch.inputs) feeds.push_back({n, t});
  auto outs = (*interp)->Run(feeds);
  EXPECT_TRUE(outs.ok());
  return outs->back().tensor;
}

TEST(LayerInputCache, InputsEqualFullRunsAndTheQuantizedSideIsOnItsGrid) {
  CalibrateOptions c;
  c.model = kModel;
  c.data = "fashion-mnist:calib";
  c.samples = 16;
  c.progress = false;
  auto prepared = PrepareCalibration(c);
  if (!prepared.ok() && prepared.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << prepared.status().message();
  }
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  auto built = BuildPlan(prepared->statistics, prepared->model, prepared->sites, {c.method, {}});
  ASSERT_TRUE(built.ok());
  std::vector<analysis::SkippedLayer> skipped;
  auto layers =
      analysis::FindPtqLayers(*prepared->model.model, built->plan, prepared->sites.sites, &skipped);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_GE(layers->size(), 3u);
  EXPECT_TRUE(skipped.empty());
  // plain_cnn's convolutions are followed by Relu: the block reaches past it.
  EXPECT_EQ((*layers)[0].op_type, "Conv");
  EXPECT_NE((*layers)[0].block_output, (*layers)[0].output);
  auto source = data::OpenSource(c.data, data::ModelInputs(*prepared->model.model));
  ASSERT_TRUE(source.ok());
  std::vector<data::Batch> batches;
  for (int64_t s = 0; s < 16; s += 8) {
    auto b = (*source)->Read(s, 8);
    ASSERT_TRUE(b.ok());
    batches.push_back(*b);
  }
  analysis::SimulationOptions sim;
  sim.mode = passes::PlacementPolicy::kTensorRT;
  auto cache = analysis::LayerInputCache::Create(prepared->model.model, batches, sim);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ((*cache)->num_samples(), 16);
  // The grid check wants the FP32 float part: there a DequantizeLinear output is exactly q * s.
  // The default FP16 part is checked below (a second cache).
  quant::QuantPlan fp32_plan = built->plan;
  fp32_plan.float_precision = quant::FloatPrecision{};
  ASSERT_EQ(fp32_plan.float_precision.dtype, quant::FloatDType::kFloat32);
  for (const analysis::PtqLayer& layer : *layers) {
    SCOPED_TRACE(layer.output);
    auto in = (*cache)->Advance(layer, fp32_plan);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    ASSERT_EQ(in->fp32.size(), 2u);
    ASSERT_EQ(in->quantized.size(), 2u);
    for (size_t b = 0; b < 2; ++b) {
      // Segment by segment gives the bits a full run gives (same kernels, same inputs).
      EXPECT_TRUE(in->fp32[b].ContentEquals(FullRunValue(kModel, batches[b], layer.data_input)));
    }
    const quant::TensorQuant* act = built->plan.Find(layer.data_input);
    if (act && act->quantized) {
      const float s = act->scale[0];
      const float* q = in->quantized[0].data_as<float>();
      int off_grid = 0;
      for (int64_t i = 0; i < in->quantized[0].numel(); ++i)
        off_grid += std::fabs(q[i] / s - std::nearbyint(q[i] / s)) > 1e-3f;
      EXPECT_EQ(off_grid, 0) << "the simulated input is fake-quantized with the plan's scale " << s;
    }
  }
  EXPECT_GT((*cache)->peak_bytes(), 0);

  // The default FP16 float part (issue 29): the simulated input is what TensorRT computes, q times
  // the FP16 scale (kept in FP32 where the DequantizeLinear is fused into its INT8 layers,
  // runtime/trt_fusions.h, else rounded to FP16), handed to the FP32 layer fit as float.
  ASSERT_EQ(built->plan.float_precision.dtype, quant::FloatDType::kFloat16);
  auto cache16 = analysis::LayerInputCache::Create(prepared->model.model, batches, sim);
  ASSERT_TRUE(cache16.ok()) << cache16.status().ToString();
  for (const analysis::PtqLayer& layer : *layers) {
    SCOPED_TRACE(layer.output);
    auto in = (*cache16)->Advance(layer, built->plan);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    ASSERT_EQ(in->quantized.size(), 2u);
    ASSERT_EQ(in->quantized[0].dtype(), ir::DType::kFloat) << "not widened for the FP32 fit";
    const quant::TensorQuant* act = built->plan.Find(layer.data_input);
    if (act && act->quantized) {
      const float s16 = ir::RoundToFloatType(act->scale[0], ir::DType::kFloat16);
      const float* q = in->quantized[0].data_as<float>();
      int off_grid = 0;
      for (int64_t i = 0; i < in->quantized[0].numel(); ++i) {
        const float k = std::nearbyint(q[i] / s16);
        off_grid += q[i] != k * s16 && q[i] != ir::RoundToFloatType(k * s16, ir::DType::kFloat16);
      }
      EXPECT_EQ(off_grid, 0) << "not the FP16 DequantizeLinear of the FP16 scale " << s16;
    }
  }
}

// calibrate plain_cnn on 32 samples with `stages` on 16 of them in runs of 8, no progress bars.
CalibrateOptions PtqOn(const std::string& stages) {
  CalibrateOptions c;
  c.model = kModel;
  c.data = "fashion-mnist:calib";
  c.samples = 32;
  c.progress = false;
  auto parsed = ParsePtqStages(stages);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (parsed.ok()) c.ptq.stages = *parsed;
  c.ptq.samples = 16;
  c.ptq.batch = 8;
  c.ptq.progress = false;
  return c;
}

// Each of `files` has the same bytes in dir/a and dir/b.
void ExpectSameFiles(const ScratchDir& dir, std::initializer_list<const char*> files) {
  for (const char* f : files) {
    auto x = ReadFileToString(dir.File(std::string("a/") + f));
    auto y = ReadFileToString(dir.File(std::string("b/") + f));
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_TRUE(*x == *y) << f << " differs between two runs with the same seed";
  }
}

TEST(CalibratePtq, StagesReachEveryArtifactAndAreDeterministic) {
  ScratchDir dir;
  CalibrateOptions c = PtqOn("seqmse:candidates=8,adaround:iterations=30");
  c.output_dir = dir.File("a");
  auto r = Calibrate(c);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) GTEST_SKIP() << r.status().message();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->ptq.stages.size(), 2u);
  EXPECT_EQ(r->ptq.samples, 16);
  ASSERT_FALSE(r->plan.initializers.empty());
  ASSERT_EQ(r->plan.provenance.stages.size(), 2u);
  EXPECT_EQ(r->plan.provenance.stages[0].rfind("seqmse(candidates=8)", 0), 0u)
      << r->plan.provenance.stages[0];
  EXPECT_NE(r->summary.find("ptq adaround("), std::string::npos) << r->summary;
  // The float model for the cache holds the stages' weights; the plan names it by its hash.
  const std::string float_model = dir.File("a/model.float.onnx");
  ASSERT_TRUE(std::filesystem::exists(float_model));
  auto sha = Sha256OfFile(float_model);
  ASSERT_TRUE(sha.ok());
  auto read = formats::ReadPlanJson(dir.File("a/plan.json"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->provenance.float_model_sha256, *sha);
  EXPECT_EQ(read->provenance.stages, r->plan.provenance.stages);
  auto fm = onnx_io::ImportModel(float_model);
  auto qdq = onnx_io::ImportModel(dir.File("a/model.qdq.onnx"));
  ASSERT_TRUE(fm.ok() && qdq.ok());
  for (const auto& [name, o] : r->plan.initializers) {
    SCOPED_TRACE(name);
    const ir::Value* f = fm->graph->FindValue(name);
    ASSERT_TRUE(f && f->initializer);
    EXPECT_TRUE(f->initializer->ContentEquals(o.value));
    // The Q/DQ model stores the weights as INT8 behind a DequantizeLinear (the default weight
    // storage); the stages' weights lie on the plan's grid, so DequantizeLinear gives them back.
    const quant::TensorQuant* e = r->plan.Find(name);
    ASSERT_TRUE(e && e->quantized);
    const ir::Value* q = qdq->graph->FindValue(name + "_quantized");
    ASSERT_TRUE(q && q->initializer);
    ASSERT_EQ(q->initializer->dtype(), ir::DType::kInt8);
    ASSERT_EQ(q->initializer->numel(), o.value.numel());
    ASSERT_EQ(e->axis, 0);  // Conv and Gemm (transB) weights: one scale per output channel
    const int64_t per_channel = o.value.numel() / static_cast<int64_t>(e->scale.size());
    const int8_t* stored = q->initializer->data_as<int8_t>();
    const float* want = o.value.data_as<float>();
    int64_t off = 0;
    for (int64_t i = 0; i < o.value.numel(); ++i) {
      off += static_cast<float>(stored[i]) * e->scale[i / per_channel] != want[i];
    }
    EXPECT_EQ(off, 0) << "weights the INT8 storage does not reproduce exactly";
  }
  // The same run again: the same bytes.
  c.output_dir = dir.File("b");
  auto again = Calibrate(c);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectSameFiles(dir, {"plan.json", "model.qdq.onnx", "model.float.onnx"});
}

// Issue #48 deliver 2: an error about an input of a sub-model a stage built names the sub-model
// (what it computes from what, and the model it came from), not "the model's inputs are".
TEST(ExtractSubModel, AnInputItLacksIsNamedWithTheSubModel) {
  auto model = analysis::LoadModelForQuantization(kModel);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Node* conv = nullptr;
  for (const ir::Node* n : model->graph->nodes()) {
    if (!conv && n->op_type() == "Conv") conv = n;
  }
  ASSERT_NE(conv, nullptr);
  const std::string input = model->graph->inputs().front()->name(), out = conv->output(0)->name();
  auto sub = analysis::ExtractSubModel(*model, {input}, {out});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  auto interp = runtime::Interpreter::Create(std::move(*sub));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  ir::Tensor x(ir::DType::kFloat, {1, 1, 28, 28});
  auto ran = (*interp)->Run({{input, x}, {"state", x}});
  ASSERT_FALSE(ran.ok());
  const std::string& m = ran.status().message();
  EXPECT_NE(m.find("unknown input 'state'"), std::string::npos) << m;
  EXPECT_NE(m.find("sub-model of"), std::string::npos) << m;
  EXPECT_NE(m.find(out), std::string::npos) << m;
}

TEST(ApplyInitializerOverrides, WritesWhatThePlanHoldsAndChecksNamesAndDims) {
  auto model = analysis::LoadModelForQuantization(kModel);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Value* w = nullptr;
  for (const ir::Node* n : model->graph->nodes()) {
    if (n->op_type() == "Conv") w = n->input(1);
    if (w) break;
  }
  ASSERT_TRUE(w && w->initializer);
  ir::Tensor changed(ir::DType::kFloat, w->initializer->dims());
  changed.mutable_data_as<float>()[0] = 0.25f;
  quant::QuantPlan plan;
  plan.initializers[w->name()] = {changed, "test"};
  ASSERT_TRUE(passes::ApplyInitializerOverrides(plan, &*model).ok());
  EXPECT_TRUE(model->graph->FindValue(w->name())->initializer->ContentEquals(changed));
  // A name the model does not read, and other dims: refused, naming the tensor (a plan for another
  // model would otherwise export weights that were never computed for it).
  quant::QuantPlan wrong_name;
  wrong_name.initializers["no_such_weight"] = {changed, "test"};
  Status s = passes::ApplyInitializerOverrides(wrong_name, &*model);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'no_such_weight'"), std::string::npos) << s.message();
  quant::QuantPlan wrong_dims;
  wrong_dims.initializers[w->name()] = {ir::Tensor(ir::DType::kFloat, {3}), "test"};
  s = passes::ApplyInitializerOverrides(wrong_dims, &*model);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dims [3]"), std::string::npos) << s.message();
}

TEST(CheckPlanFloatModel, APlanFileWithStageWeightsPairsOnlyWithItsFloatModel) {
  quant::QuantPlan plan;
  EXPECT_TRUE(analysis::CheckPlanFloatModel(plan, kModel).ok());  // no stages: any model
  plan.provenance.stages = {"adaround(iterations=1) samples=1 batch=1 seed=0"};
  plan.provenance.float_model_sha256 = std::string(64, 'a');
  Status s = analysis::CheckPlanFloatModel(plan, kModel);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.float.onnx"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("adaround"), std::string::npos) << s.message();
  auto sha = Sha256OfFile(kModel);
  ASSERT_TRUE(sha.ok());
  plan.provenance.float_model_sha256 = *sha;
  EXPECT_TRUE(analysis::CheckPlanFloatModel(plan, kModel).ok());
}

// smoothquant through Calibrate on plain_cnn (Conv -> Relu -> MaxPool -> Conv groups): the written
// model.float.onnx computes the original's function, the plan names the alpha, and the chosen alpha
// (each trial on the held-out tail listed) gives the same bytes twice.
TEST(CalibratePtq, SmoothQuantKeepsTheFloatFunctionAndIsDeterministic) {
  ScratchDir dir;
  CalibrateOptions c = PtqOn("smoothquant:alpha=0.5");
  c.floats.dtype = quant::FloatDType::kFloat32;
  c.output_dir = dir.File("fixed");
  auto r = Calibrate(c);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) GTEST_SKIP() << r.status().message();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->summary.find("ptq smoothquant: alpha 0.5 (given); "), std::string::npos)
      << r->summary;
  ASSERT_EQ(r->plan.provenance.stages.size(), 1u);
  EXPECT_EQ(r->plan.provenance.stages[0].rfind("smoothquant(alpha=0.5) samples=16", 0), 0u);
  ASSERT_FALSE(r->plan.initializers.empty());
  for (const auto& [name, o] : r->plan.initializers) EXPECT_EQ(o.stage, "smoothquant") << name;
  // The smoothed float model against the original on 8 calibration samples.
  auto source =
      data::OpenSource(c.data, data::ModelInputs(*analysis::LoadModelForQuantization(kModel)));
  ASSERT_TRUE(source.ok());
  auto batch = (*source)->Read(0, 8);
  ASSERT_TRUE(batch.ok());
  std::vector<runtime::NamedTensor> feeds;
  for (const auto& [n, t] : batch->inputs) feeds.push_back({n, t});
  auto run = [&](const std::string& path) {
    auto m = analysis::LoadModelForQuantization(path);
    EXPECT_TRUE(m.ok());
    auto interp = runtime::Interpreter::Create(std::move(*m));
    EXPECT_TRUE(interp.ok());
    auto outs = (*interp)->Run(feeds);
    EXPECT_TRUE(outs.ok());
    return outs->at(0).tensor;
  };
  const ir::Tensor before = run(kModel), after = run(dir.File("fixed/model.float.onnx"));
  ASSERT_EQ(before.numel(), after.numel());
  float peak = 0;
  for (int64_t i = 0; i < before.numel(); ++i)
    peak = std::max(peak, std::fabs(before.data_as<float>()[i]));
  int64_t off = 0;
  for (int64_t i = 0; i < before.numel(); ++i) {
    off += std::fabs(after.data_as<float>()[i] - before.data_as<float>()[i]) >
           testing::kSmoothFoldRtol * peak;
  }
  EXPECT_EQ(off, 0)
      << "logits of the smoothed float model off the original's by more than kSmoothFoldRtol";

  // alpha chosen: every trial listed, the same bytes twice.
  c.ptq.stages = *ParsePtqStages("smoothquant");
  c.output_dir = dir.File("a");
  auto a = Calibrate(c);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->ptq.stages.size(), 1u);
  EXPECT_EQ(a->ptq.stages[0].notes.size(), 7u);  // none and 0.3, 0.4, ..., 0.8
  EXPECT_NE(a->summary.find("ptq smoothquant: alpha "), std::string::npos) << a->summary;
  EXPECT_LE(a->ptq.stages[0].loss_after, a->ptq.stages[0].loss_before);  // "none" is a candidate
  c.output_dir = dir.File("b");
  auto b = Calibrate(c);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameFiles(dir, {"plan.json", "model.qdq.onnx"});
}

TEST(CalibratePtq, NeedsTheDataItself) {
  CalibrateOptions c;
  c.model = kModel;
  c.from_stats = {"/nonexistent.qkstats"};
  c.ptq.stages = *ParsePtqStages("adaround");
  auto r = Calibrate(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--data"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace quantkit::pipelines
