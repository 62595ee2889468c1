// Models as shipped (issue 20): opset upgrade at import, per-input batch axes (recurrent states,
// scalar inputs), fixed-batch models, samples of different shapes, and the default metric.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "analysis/metrics.h"
#include "analysis/model_loading.h"
#include "data/npy.h"
#include "data/shard.h"
#include "data/source.h"
#include "ir/verifier.h"
#include "onnx/import.h"
#include "onnx/opset_upgrade.h"
#include "runtime/interpreter.h"
#include "testing/onnx_builders.h"
#include "testing/text_models.h"
#include "testing/tolerances.h"

namespace quantkit {
namespace {

using testing::TempDir;
using testing::WriteModel;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WritePb(const std::string& path, const ir::Tensor& t) {
  ::onnx::TensorProto p;
  p.set_data_type(t.dtype() == ir::DType::kInt64 ? ::onnx::TensorProto::INT64
                                                 : ::onnx::TensorProto::FLOAT);
  for (int64_t d : t.dims()) p.add_dims(d);
  p.set_raw_data(std::string(static_cast<const char*>(t.data()), t.nbytes()));
  std::ofstream(path, std::ios::binary) << p.SerializeAsString();
}

ir::Tensor Iota(std::vector<int64_t> dims, float start) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = start + 0.01f * static_cast<float>(i % 97);
  return ir::Tensor::FromVector<float>(ir::DType::kFloat, dims, v);
}

// Runs a model whose one input is "x" in the interpreter.
auto RunOnX(ir::Model m, ir::Tensor x) {
  auto interp = runtime::Interpreter::Create(std::move(m));
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  auto out = (*interp)->Run({{"x", std::move(x)}});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return std::move(*out);
}

// Softmax before opset 13 normalises over the input flattened at `axis`; ReduceSum-11 takes its
// axes as an attribute. Both change at 13, so an upgrade that only bumped the version number
// would change the outputs.
constexpr const char* kOpset11 = R"(
  <ir_version: 6, opset_import: ["" : 11]>
  old (float[N, 3, 4] x) => (float[N, 3, 4] y, float[N, 3, 1] s) {
    y = Softmax<axis = 1>(x)
    s = ReduceSum<axes = [2], keepdims = 1>(x)
  })";

TEST(OpsetUpgrade, Opset11ModelIsUpgradedWithTheSameOutputsAndTheFileUntouched) {
  TempDir dir;
  const std::string path = WriteModel(dir, "old.onnx", kOpset11);
  const std::string before = ReadAll(path);
  onnx_io::OpsetUpgrade upgrade;
  auto upgraded = analysis::LoadModelForQuantization(path, &upgrade);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().ToString();
  EXPECT_EQ(upgrade.from, 11);
  EXPECT_EQ(upgrade.to, 13);
  EXPECT_TRUE(upgrade.upgraded());
  EXPECT_EQ(upgraded->OpsetFor(""), 13);
  EXPECT_EQ(ReadAll(path), before);  // inputs are never modified

  auto original = onnx_io::ImportModel(path);
  ASSERT_TRUE(original.ok());
  const auto want = RunOnX(std::move(*original), Iota({2, 3, 4}, -1.0f));
  const auto got = RunOnX(std::move(*upgraded), Iota({2, 3, 4}, -1.0f));
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].tensor.dims(), got[o].tensor.dims()) << want[o].name;
    for (int64_t i = 0; i < want[o].tensor.numel(); ++i) {
      EXPECT_NEAR(want[o].tensor.data_as<float>()[i], got[o].tensor.data_as<float>()[i],
                  testing::kOpsetUpgradeAtol)
          << want[o].name << "[" << i << "]";
    }
  }
}

TEST(OpsetUpgrade, Opset13ModelIsImportedAsIs) {
  TempDir dir;
  const std::string path = WriteModel(dir, "new.onnx", R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (float[N, 4] y) { y = Relu(x) })");
  onnx_io::OpsetUpgrade upgrade;
  auto m = onnx_io::ImportModelAtLeastOpset(path, 13, &upgrade);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(upgrade.upgraded());
  EXPECT_EQ(upgrade.from, 13);
}

TEST(OpsetUpgrade, RefusedUpgradeIsUnsupportedAndNamesTheFileAndTensor) {
  TempDir dir;
  // External data would be dropped by the converter: refused with a clear reason, not lost.
  ::onnx::ModelProto model;
  ASSERT_TRUE(::onnx::OnnxParser::Parse(model, R"(
    <ir_version: 6, opset_import: ["" : 11]>
    g (float[4] x) => (float[4] y) { y = Add(x, w) })")
                  .IsOK());
  testing::AddExternalFloatInitializer(model.mutable_graph(), "w", 4, "w.bin");
  std::ofstream(dir.File("w.bin"), std::ios::binary) << std::string(16, '\0');
  const std::string path = dir.File("external.onnx");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
  onnx_io::OpsetUpgrade upgrade;
  auto m = onnx_io::ImportModelAtLeastOpset(path, 13, &upgrade);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << m.status().ToString();
  EXPECT_NE(m.status().message().find("external.onnx"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("'w'"), std::string::npos) << m.status().message();
}

// A streaming recurrent model as shipped: audio [batch, 512], state [2, batch, 128], scalar sr;
// plus a fixed-batch-1 input and a state whose batch dim has no name.
constexpr const char* kStateful = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[batch, 8] audio, float[2, batch, 4] state, int64 sr, float[2, M, 3] h2) => (float[batch, 8] y) {
    y = Relu(audio)
  })";

TEST(BatchAxes, InferredFromTheModelShapes) {
  TempDir dir;
  auto model = onnx_io::ImportModel(WriteModel(dir, "s.onnx", kStateful));
  ASSERT_TRUE(model.ok());
  const auto inputs = data::ModelInputs(*model);
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_EQ(inputs[0].batch_axis, 0);
  EXPECT_EQ(inputs[1].batch_axis, 1);  // shares 'batch' with audio's leading dim
  EXPECT_EQ(inputs[2].batch_axis, data::kUnbatched);
  EXPECT_TRUE(inputs[2].has_rank);
  EXPECT_EQ(inputs[3].batch_axis, 1);  // [layers, B, H]: fixed leading dim above 1, then dynamic
  EXPECT_EQ(inputs[1].SampleDims(), (std::vector<int64_t>{2, 4}));
}

// Recorded per-call inputs in the ONNX test_data_set layout: state [2,1,4], sr a scalar. Before
// issue 20 this exited 70 ("cannot create std::vector larger than max_size()").
TEST(BatchAxes, RecordedCallsStackOnEachInputsBatchAxis) {
  TempDir dir;
  auto model = onnx_io::ImportModel(WriteModel(dir, "s.onnx", kStateful));
  ASSERT_TRUE(model.ok());
  const std::string data = dir.File("calls");
  for (int i = 0; i < 3; ++i) {
    const std::string set = data + "/test_data_set_" + std::to_string(i);
    ASSERT_EQ(std::system(("mkdir -p '" + set + "'").c_str()), 0);
    WritePb(set + "/input_0.pb", Iota({1, 8}, static_cast<float>(i)));
    WritePb(set + "/input_1.pb", Iota({2, 1, 4}, 10.0f * static_cast<float>(i)));
    WritePb(set + "/input_2.pb", ir::Tensor::FromVector<int64_t>(ir::DType::kInt64, {}, {16000}));
    WritePb(set + "/input_3.pb", Iota({2, 1, 3}, 0.0f));
  }
  auto source = data::OpenSource(data, data::ModelInputs(*model));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->num_samples(), 3);
  auto batch = (*source)->Read(0, 3);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const ir::Tensor& state = batch->inputs[1].second;
  EXPECT_EQ(state.dims(), (std::vector<int64_t>{2, 3, 4}));
  // state[l, b, :] is call b's state[l, 0, :]: call 1's layer 1 starts at 10 + 0.01 * 4.
  EXPECT_FLOAT_EQ(state.data_as<float>()[(1 * 3 + 1) * 4], 10.0f + 0.04f);
  const ir::Tensor& sr = batch->inputs[2].second;
  EXPECT_EQ(sr.rank(), 0);
  EXPECT_EQ(sr.data_as<int64_t>()[0], 16000);
}

TEST(BatchAxes, DataConfigOverridesAndRejectsBadAxes) {
  TempDir dir;
  auto model = onnx_io::ImportModel(WriteModel(dir, "s.onnx", kStateful));
  ASSERT_TRUE(model.ok());
  // Per-input arrays, samples on the leading axis: state.npy holds [N, 2, 4] per-sample states.
  ASSERT_TRUE(data::WriteNpy(dir.File("audio.npy"), Iota({5, 8}, 0)).ok());
  ASSERT_TRUE(data::WriteNpy(dir.File("state.npy"), Iota({5, 2, 4}, 0)).ok());
  ASSERT_TRUE(data::WriteNpy(dir.File("sr.npy"),
                             ir::Tensor::FromVector<int64_t>(ir::DType::kInt64, {5},
                                                             {8000, 8000, 16000, 16000, 16000}))
                  .ok());
  ASSERT_TRUE(data::WriteNpy(dir.File("h2.npy"), Iota({5, 2, 3}, 0)).ok());
  auto source = data::OpenSource(dir.path(), data::ModelInputs(*model));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // sr changes between samples 1 and 2: one batch cannot hold both, ReadStackable splits there.
  auto batches = data::ReadStackable(**source, 0, 5);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].size, 2);
  EXPECT_EQ((*batches)[1].size, 3);
  EXPECT_EQ((*batches)[1].inputs[1].second.dims(), (std::vector<int64_t>{2, 3, 4}));

  std::ofstream(dir.File("bad.json")) << R"({"inputs": {"audio": {"data": "audio.npy"},
      "state": {"data": "state.npy", "batch_axis": 7}, "sr": "sr.npy", "h2": "h2.npy"}})";
  auto bad = data::OpenSource(dir.File("bad.json"), data::ModelInputs(*model));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("batch_axis"), std::string::npos) << bad.status().message();

  // h2 declared unbatched: fed as is, one [2, M, 3] value per run.
  ASSERT_TRUE(data::WriteNpy(dir.File("h2_fixed.npy"), Iota({5, 2, 7, 3}, 0)).ok());
  std::ofstream(dir.File("ok.json")) << R"({"inputs": {"audio": {"data": "audio.npy"},
      "state": {"data": "state.npy", "batch_axis": 1}, "sr": "sr.npy", "h2": {"data": "h2_fixed.npy", "batch_axis": null}}})";
  auto ok = data::OpenSource(dir.File("ok.json"), data::ModelInputs(*model));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto one = (*ok)->Read(0, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->inputs[3].second.dims(), (std::vector<int64_t>{2, 7, 3}));
}

TEST(Shapes, FixedBatchCapsTheBatchAndVaryingWidthsRunInGroups) {
  TempDir dir;
  auto fixed = onnx_io::ImportModel(WriteModel(dir, "f.onnx", R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 16, 6] x) => (float[1, 16, 6] y) { y = Relu(x) })"));
  ASSERT_TRUE(fixed.ok());
  ASSERT_TRUE(data::WriteNpy(dir.File("x.npy"), Iota({32, 16, 6}, 0)).ok());
  auto source = data::OpenSource(dir.File("x.npy"), data::ModelInputs(*fixed));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(data::EffectiveBatchSize(**source, 32), 1);

  auto lines = onnx_io::ImportModel(WriteModel(dir, "l.onnx", R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 1, 4, W] x) => (float[N, 1, 4, W] y) { y = Relu(x) })"));
  ASSERT_TRUE(lines.ok());
  const std::string samples = dir.File("lines");
  ASSERT_EQ(std::system(("mkdir -p '" + samples + "'").c_str()), 0);
  const int64_t widths[] = {6, 6, 9, 9, 9, 6};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(data::WriteNpy(samples + "/s" + std::to_string(i) + ".npy",
                               Iota({1, 4, widths[i]}, static_cast<float>(i)))
                    .ok());
  }
  auto src = data::OpenSource(samples, data::ModelInputs(*lines));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto batches = data::ReadStackable(**src, 0, 6);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  // Grouped by shape across the window, not only in adjacent runs: widths 6 (samples 0, 1, 5)
  // and 9 (samples 2-4) make two batches, where adjacent runs alone would make three.
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_EQ((*batches)[0].inputs[0].second.dims(), (std::vector<int64_t>{3, 1, 4, 6}));
  EXPECT_EQ((*batches)[1].inputs[0].second.dims(), (std::vector<int64_t>{3, 1, 4, 9}));
  // The first batch's third sample is sample 5 (its first value is 5).
  EXPECT_FLOAT_EQ((*batches)[0].inputs[0].second.data_as<float>()[2 * 4 * 6], 5.0f);
}

// calibrate --budget and --method auto hold out the tail of the calibration data: Take(n) is the
// head the plan is calibrated on, Slice([n, end)) the tail it is judged on, with no sample in both.
TEST(Holdout, TakeAndSliceSplitTheSamplesWithoutOverlap) {
  TempDir dir;
  auto model = onnx_io::ImportModel(WriteModel(dir, "m.onnx", R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) })"));
  ASSERT_TRUE(model.ok());
  std::vector<float> values;
  for (int i = 0; i < 8; ++i)
    values.insert(values.end(), 3, static_cast<float>(i));  // sample i holds i
  ASSERT_TRUE(data::WriteNpy(dir.File("x.npy"),
                             ir::Tensor::FromVector<float>(ir::DType::kFloat, {8, 3}, values))
                  .ok());
  auto open = [&] {
    auto s = data::OpenSource(dir.File("x.npy"), data::ModelInputs(*model));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  };
  auto head = data::Take(open(), 6);
  auto tail = data::Slice(open(), {6, 8});
  ASSERT_EQ(head->num_samples(), 6);
  ASSERT_EQ(tail->num_samples(), 2);
  auto first_of = [](const data::Source& s, int64_t i) {
    auto b = s.Read(i, 1);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b->inputs[0].second.data_as<float>()[0];
  };
  EXPECT_EQ(first_of(*head, 5), 5.0f);
  EXPECT_EQ(first_of(*tail, 0), 6.0f);  // the tail starts where the head ends
  EXPECT_EQ(first_of(*tail, 1), 7.0f);
  EXPECT_NE(head->Fingerprint(), tail->Fingerprint());
  EXPECT_FALSE(tail->Read(1, 2).ok());  // reading past the window is refused, not wrapped
}

// torch.onnx's export of `if x.size(1) == 3:` on an input that declares 3 channels: the condition
// is Shape -> Gather -> Equal -> Cast, fixed by the model, and both branches hold a Conv.
constexpr const char* kStaticIf = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  static_if (float[N, 3, W] x) => (float[N, 2, W] y)
      <float[2, 3, 1] wa = {1, 0, 0, 0, 1, 0}, float[2, 3, 1] wb = {0, 0, 1, 1, 1, 1}> {
    shape = Shape(x)
    idx = Constant<value = int64[1] {1}>()
    channels = Gather<axis = 0>(shape, idx)
    three = Constant<value = int64[1] {3}>()
    eq = Equal(channels, three)
    cond = Cast<to = 9>(eq)
    y = If(cond) <
      then_branch = then_g () => (float[N, 2, W] ya) { ya = Conv(x, wa) },
      else_branch = else_g () => (float[N, 2, W] yb) { yb = Conv(x, wb) }>
  })";

// The same If on a scalar graph input: its branch depends on the data and must stay an If.
constexpr const char* kDataIf = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  data_if (float[N, 3, W] x, bool flag) => (float[N, 2, W] y)
      <float[2, 3, 1] wa = {1, 0, 0, 0, 1, 0}, float[2, 3, 1] wb = {0, 0, 1, 1, 1, 1}> {
    y = If(flag) <
      then_branch = then_g () => (float[N, 2, W] ya) { ya = Conv(x, wa) },
      else_branch = else_g () => (float[N, 2, W] yb) { yb = Conv(x, wb) }>
  })";

int CountOp(const ir::Graph& g, const std::string& op_type) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op_type;
  return n;
}

TEST(FoldConstantIf, IfOnAStaticDimensionBecomesTheTakenBranchWithTheSameOutputs) {
  TempDir dir;
  const std::string path = WriteModel(dir, "static_if.onnx", kStaticIf);
  std::vector<passes::PassReport> reports;
  auto loaded = analysis::LoadModelForQuantization(path, nullptr, &reports);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const passes::PassReport* ifs = passes::FindReport(reports, "fold_constant_if");
  ASSERT_NE(ifs, nullptr);
  EXPECT_EQ(ifs->Count(passes::counter::kFolded), 1);
  ASSERT_TRUE(ir::Verify(*loaded).ok()) << ir::Verify(*loaded).ToString();
  const ir::Node* conv = nullptr;
  for (const ir::Node* n : loaded->graph->nodes()) {
    if (n->op_type() == "Conv") conv = n;
  }
  EXPECT_EQ(CountOp(*loaded->graph, "If"), 0);
  // The condition's Shape -> Gather -> Equal -> Cast chain, dead without its If, is gone too.
  EXPECT_EQ(loaded->graph->num_nodes(), 1u);
  // The then branch (3 channels == 3) is now in the main graph, where Q/DQ placement sees it.
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->input(0)->name(), "x");
  EXPECT_EQ(conv->input(1)->name(), "wa");
  EXPECT_EQ(conv->output(0)->name(), "y");  // the If's output name, a graph output, is kept
  ASSERT_EQ(loaded->graph->outputs().size(), 1u);
  EXPECT_EQ(loaded->graph->outputs()[0], conv->output(0));

  auto original = onnx_io::ImportModel(path);
  ASSERT_TRUE(original.ok());
  const auto want = RunOnX(std::move(*original), Iota({2, 3, 5}, -0.5f));
  const auto got = RunOnX(std::move(*loaded), Iota({2, 3, 5}, -0.5f));
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want[0].tensor.dims(), got[0].tensor.dims());
  for (int64_t i = 0; i < want[0].tensor.numel(); ++i) {
    // Folding moves nodes; it computes nothing, so the values are bit-identical.
    EXPECT_EQ(want[0].tensor.data_as<float>()[i], got[0].tensor.data_as<float>()[i]) << i;
  }
}

TEST(FoldConstantIf, IfOnDataStaysAnIf) {
  TempDir dir;
  const std::string path = WriteModel(dir, "data_if.onnx", kDataIf);
  std::vector<passes::PassReport> reports;
  auto loaded = analysis::LoadModelForQuantization(path, nullptr, &reports);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const passes::PassReport* ifs = passes::FindReport(reports, "fold_constant_if");
  ASSERT_NE(ifs, nullptr);
  EXPECT_EQ(ifs->Count(passes::counter::kFolded), 0);
  EXPECT_FALSE(ifs->changed);
  EXPECT_EQ(CountOp(*loaded->graph, "If"),
            1);  // without the check, a folded If would fix the branch for every input
}

TEST(DefaultMetric, ArgmaxOnlyForAClassVector) {
  EXPECT_EQ(analysis::DefaultMetricName(/*has_labels=*/true, /*class_output=*/true), "top1");
  EXPECT_EQ(analysis::DefaultMetricName(/*has_labels=*/false, /*class_output=*/true), "agreement");
  // A [B,1] score or a CTC sequence: argmax over it says "no loss" while the output is ruined.
  EXPECT_EQ(analysis::DefaultMetricName(/*has_labels=*/false, /*class_output=*/false), "rel_mse");
  EXPECT_EQ(analysis::DefaultMetricName(/*has_labels=*/true, /*class_output=*/false), "rel_mse");
}

}  // namespace
}  // namespace quantkit
