// Quantization inside If/Loop/Scan bodies (issue 20, item 4 on data-dependent control flow): the
// interpreter reports body tensors under qualified names (ir/scopes.h), every Loop/Scan iteration
// included; Q/DQ placement finds sites inside bodies; passes::ApplyPlan puts the pairs inside
// them; the quantized model verifies, survives export and stays close to FP32.
// Models are written in ONNX text syntax; onnxruntime runs the exported results in
// tests/e2e/realmodels/control_flow_test.py.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "analysis/collect_pass.h"
#include "analysis/model_loading.h"
#include "ir/scopes.h"
#include "ir/verifier.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "passes/apply_plan.h"
#include "runtime/interpreter.h"
#include "testing/text_models.h"
#include "testing/tolerances.h"

namespace quantkit {
namespace {

using testing::TempDir;
using testing::WriteModel;

// If on a graph input: the then branch reads the main graph's x and weight wa (captures); the
// else branch has a tensor and a weight of its own.
constexpr const char* kIfOnData = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  if_data (float[N, 3, W] x, bool flag) => (float[N, 2, W] y)
      <float[2, 3, 1] wa = {1, 0.5, 0, 0, 1, -0.5}> {
    y = If(flag) <
      then_branch = then_g () => (float[N, 2, W] ya) { ya = Conv(x, wa) },
      else_branch = else_g () => (float[N, 2, W] yb) {
        wb = Constant<value = float[2, 3, 1] {0, 0.25, 1, 1, -1, 1}>()
        r = Relu(x)
        yb = Conv(r, wb)
      }>
  })";

// Loop: the carried state goes through MatMul with a main-graph weight n times.
constexpr const char* kLoop = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  loop_model (float[2, 4] x, int64 n) => (float[2, 4] y)
      <float[4, 4] w = {0.5, -0.25, 0, 0.1, 0.2, 0.4, -0.3, 0, 0, 0.1, 0.6, -0.2, -0.1, 0, 0.2, 0.5}> {
    keep = Constant<value = bool {1}>()
    y = Loop(n, keep, x) <body = body_g (int64 i, bool c, float[2, 4] s) => (bool co, float[2, 4] so) {
      co = Identity(c)
      m = MatMul(s, w)
      so = Tanh(m)
    }>
  })";

// Scan over 5 steps: state + element through MatMul with the body's own weight.
constexpr const char* kScan = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  scan_model (float[5, 4] xs) => (float[4] last, float[5, 4] ys) {
    init = Constant<value = float[4] {0, 0, 0, 0}>()
    last, ys = Scan(init, xs) <num_scan_inputs = 1, body = scan_g (float[4] s, float[4] xt) => (float[4] so, float[4] yt) {
      wk = Constant<value = float[4, 4] {0.3, 0, -0.2, 0.1, 0.1, 0.5, 0, -0.4, 0, 0.2, 0.4, 0, -0.3, 0.1, 0, 0.6}>()
      a = Add(s, xt)
      m = MatMul(a, wk)
      so = Tanh(m)
      yt = Identity(so)
    }>
  })";

ir::Tensor Ramp(std::vector<int64_t> dims, float start, float step) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = start + step * static_cast<float>(i % 13);
  return ir::Tensor::FromVector<float>(ir::DType::kFloat, dims, v);
}

using Feeds = std::vector<std::vector<runtime::NamedTensor>>;

// Records how often each watched tensor is reported and the first value of each.
class CountingObserver final : public runtime::Observer {
 public:
  CountingObserver(std::vector<std::string> names, bool bodies)
      : names_(std::move(names)), bodies_(bodies) {}
  bool Wants(const std::string& name) const override {
    return std::find(names_.begin(), names_.end(), name) != names_.end();
  }
  bool WantsFloat() const override { return true; }
  bool WantsSubgraphTensors() const override { return bodies_; }
  Status OnTensor(const std::string& name, const ir::Node*,
                  const runtime::TensorView& view) override {
    if (count[name]++ == 0)
      first[name].assign(view.data_as<float>(), view.data_as<float>() + view.numel());
    return Status::Ok();
  }
  std::map<std::string, int> count;
  std::map<std::string, std::vector<float>> first;

 private:
  std::vector<std::string> names_;
  bool bodies_;
};

// Sites -> statistics (CollectingObserver over `feeds`) -> max plan -> ApplyPlan on a second copy
// of the model; returns the Q/DQ model after an export/import round trip.
struct Quantized {
  ir::Model model;
  std::vector<passes::QdqSite> sites;
  quant::QuantPlan plan;
  std::map<std::string, int64_t> observed;  // values each activation's collector saw
};

Quantized Quantize(const std::string& path, const Feeds& feeds) {
  Quantized q;
  auto loaded = analysis::LoadModelForQuantization(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto shared = std::make_shared<const ir::Model>(std::move(*loaded));
  auto sites = passes::FindQdqSites(*shared->graph, {});
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  q.sites = *sites;
  analysis::CollectorMap collectors;
  for (const std::string& t : passes::ActivationTensors(q.sites))
    collectors.emplace(t, quant::TensorCollector::RangeOnly());
  analysis::CollectingObserver observer(&collectors);
  auto interp = runtime::Interpreter::Create(shared);
  EXPECT_TRUE(interp.ok()) << interp.status().ToString();
  for (const auto& feed : feeds) {
    runtime::RunOptions run;
    run.observers = {&observer};
    auto out = (*interp)->Run(feed, run);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
  }
  for (const auto& [name, c] : collectors) {
    EXPECT_GT(c.range().count, 0) << name << " was never observed";
    q.observed[name] = c.range().count;
    q.plan.SetActivationAmax(name, c.range().amax, "max");
  }
  auto fresh = analysis::LoadModelForQuantization(path);
  EXPECT_TRUE(fresh.ok());
  passes::ApplyPlanOptions apply;
  apply.mode = passes::PlacementPolicy::kTensorRT;
  auto report = passes::RunPass(*fresh, passes::ApplyPlan(&q.plan, apply));
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  const Status verified = ir::Verify(*fresh);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  auto bytes = onnx_io::ExportModelToBytes(*fresh);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = onnx_io::ImportModelFromBytes(*bytes, {}, "qdq");
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  q.model = std::move(*back);
  return q;
}

// QuantizeLinear nodes per graph scope ("" = the main graph).
std::map<std::string, int> QuantizeNodesByScope(const ir::Model& m) {
  std::map<std::string, int> counts;
  ir::ForEachScopedGraph(*m.graph, [&](const ir::Graph& g, const std::string& scope) {
    for (const ir::Node* n : g.nodes()) counts[scope] += n->op_type() == "QuantizeLinear";
  });
  return counts;
}

// Largest |int8 - fp32| of every output over every feed, relative to the largest |fp32|.
double RelativeMaxError(const std::string& float_path, ir::Model int8, const Feeds& feeds) {
  auto float_model = analysis::LoadModelForQuantization(float_path);
  EXPECT_TRUE(float_model.ok());
  auto fp = runtime::Interpreter::Create(std::move(*float_model));
  auto q = runtime::Interpreter::Create(std::move(int8));
  EXPECT_TRUE(fp.ok() && q.ok());
  double err = 0, ref = 0;
  for (const auto& feed : feeds) {
    auto a = (*fp)->Run(feed);
    auto b = (*q)->Run(feed);
    EXPECT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status().ToString() : a.status().ToString());
    for (size_t o = 0; o < a->size(); ++o) {
      const ir::Tensor& x = (*a)[o].tensor;
      const ir::Tensor& y = (*b)[o].tensor;
      EXPECT_EQ(x.dims(), y.dims());
      for (int64_t i = 0; i < x.numel(); ++i) {
        err = std::max(
            err, static_cast<double>(std::fabs(x.data_as<float>()[i] - y.data_as<float>()[i])));
        ref = std::max(ref, static_cast<double>(std::fabs(x.data_as<float>()[i])));
      }
    }
  }
  return err / std::max(ref, 1e-12);
}

runtime::NamedTensor Bool(const std::string& name, bool v) {
  ir::Tensor t(ir::DType::kBool, {});
  t.mutable_data_as<uint8_t>()[0] = v ? 1 : 0;  // ONNX bool: one byte
  return {name, std::move(t)};
}
runtime::NamedTensor Int64(const std::string& name, int64_t v) {
  return {name, ir::Tensor::FromVector<int64_t>(ir::DType::kInt64, {}, {v})};
}

TEST(Scopes, BodyTensorsHaveQualifiedNamesAndCapturesTheirDefiningName) {
  TempDir dir;
  auto model = analysis::LoadModelForQuantization(WriteModel(dir, "if.onnx", kIfOnData));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto sites = passes::FindQdqSites(*model->graph, {});
  ASSERT_TRUE(sites.ok()) << sites.status().ToString();
  std::map<std::string, std::string> role_of;  // plan key -> role, for the sites inside bodies
  for (const passes::QdqSite& s : *sites) {
    EXPECT_NE(s.consumer->owner(), model->graph.get())
        << "no weighted op in the main graph: " << s.tensor;
    role_of[s.tensor] = quant::TensorRoleName(s.role);
  }
  // The If is unnamed: its scope key is its output "<y>". A capture keeps its main-graph name.
  const std::map<std::string, std::string> want = {{"x", "activation"},
                                                   {"wa", "weight"},
                                                   {"<y>.else_branch::r", "activation"},
                                                   {"<y>.else_branch::wb", "weight"}};
  EXPECT_EQ(role_of, want);
  EXPECT_NE(ir::FindQualifiedValue(*model->graph, "<y>.else_branch::r"), nullptr);
  EXPECT_EQ(ir::FindQualifiedValue(*model->graph, "<y>.then_branch::r"), nullptr);
}

TEST(Scopes, AMainGraphNameThatSpellsABodyTensorIsRefused) {
  // Without the check, the main graph's tensor and the body's would share statistics and a scale.
  TempDir dir;
  // ONNX text syntax cannot spell such a name: the clash is built in the IR.
  auto plain = analysis::LoadModelForQuantization(WriteModel(dir, "plain.onnx", kIfOnData));
  ASSERT_TRUE(plain.ok());
  ir::Graph& g = *plain->graph;
  ASSERT_TRUE(g.AddNode("Relu", {g.FindValue("x")}, {"<y>.else_branch::r"}, "", "clash").ok());
  const Status st = ir::CheckScopeNames(g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidModel);
  EXPECT_NE(st.message().find("<y>.else_branch::r"), std::string::npos) << st.message();
  EXPECT_EQ(passes::FindQdqSites(g, {}).status().code(), StatusCode::kInvalidModel);
}

TEST(BodyObservation, OnlyObserversThatAskSeeBodyTensorsEveryLoopIteration) {
  TempDir dir;
  auto model = analysis::LoadModelForQuantization(WriteModel(dir, "loop.onnx", kLoop));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto interp = runtime::Interpreter::Create(std::move(*model));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  const std::vector<std::string> names = {"<y>.body::s", "<y>.body::m", "m", "y"};
  CountingObserver bodies(names, /*bodies=*/true);
  CountingObserver top(names, /*bodies=*/false);
  runtime::RunOptions run;
  run.observers = {&bodies, &top};
  const ir::Tensor x = Ramp({2, 4}, -0.5f, 0.1f);
  auto out = (*interp)->Run({{"x", x}, Int64("n", 3)}, run);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // One report per iteration (3), the body's input included; the unqualified name is not a tensor.
  EXPECT_EQ(bodies.count["<y>.body::s"], 3);
  EXPECT_EQ(bodies.count["<y>.body::m"], 3);
  EXPECT_EQ(bodies.count["m"], 0);
  EXPECT_EQ(bodies.count["y"], 1);
  // The first iteration's state is the loop's initial value x.
  ASSERT_EQ(bodies.first["<y>.body::s"].size(), 8u);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(bodies.first["<y>.body::s"][i], x.data_as<float>()[i]) << i;
  // An observer that did not ask sees the main graph only (run --dump, diagnose unchanged).
  EXPECT_EQ(top.count["<y>.body::s"], 0);
  EXPECT_EQ(top.count["y"], 1);
}

TEST(BodyQuantization, IfOnDataBothBranchesQuantizedAndCloseToFp32) {
  TempDir dir;
  const std::string path = WriteModel(dir, "if.onnx", kIfOnData);
  // Samples take both branches, so both are calibrated.
  Feeds feeds;
  for (int k = 0; k < 4; ++k)
    feeds.push_back({{"x", Ramp({2, 3, 6}, -1.0f + 0.2f * k, 0.15f)}, Bool("flag", k % 2 == 0)});
  Quantized q = Quantize(path, feeds);
  const std::map<std::string, int> counts = QuantizeNodesByScope(q.model);
  // then: x (captured input) and wa; else: r and wb. The main graph has no weighted op.
  EXPECT_EQ(counts.at("<y>.then_branch"), 2);
  EXPECT_EQ(counts.at("<y>.else_branch"), 2);
  EXPECT_EQ(counts.at(""), 0);
  EXPECT_LT(RelativeMaxError(path, std::move(q.model), feeds), testing::kInt8TinyModelRelMax);
}

TEST(BodyQuantization, LoopBodyStatisticsCoverEveryIteration) {
  TempDir dir;
  const std::string path = WriteModel(dir, "loop.onnx", kLoop);
  Feeds feeds;
  for (int k = 0; k < 3; ++k)
    feeds.push_back({{"x", Ramp({2, 4}, -0.6f + 0.3f * k, 0.1f)}, Int64("n", 4)});
  Quantized q = Quantize(path, feeds);
  const std::map<std::string, int> counts = QuantizeNodesByScope(q.model);
  EXPECT_EQ(counts.at("<y>.body"), 2);  // the state s and the captured weight w
  // 3 samples x 4 iterations x 8 values: every iteration's state went into the statistics.
  EXPECT_EQ(q.observed.at("<y>.body::s"), 3 * 4 * 8);
  // The first iteration's state is x itself, so the range covers max|x| over the samples (0.7).
  const quant::TensorQuant* s = q.plan.Find("<y>.body::s");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->quantized);
  EXPECT_GE(s->amax.front(), 0.7f - 1e-6f);
  EXPECT_LT(RelativeMaxError(path, std::move(q.model), feeds), testing::kInt8TinyModelRelMax);
}

TEST(BodyQuantization, ScanBodyWithItsOwnWeightIsQuantized) {
  TempDir dir;
  const std::string path = WriteModel(dir, "scan.onnx", kScan);
  Feeds feeds;
  for (int k = 0; k < 3; ++k) feeds.push_back({{"xs", Ramp({5, 4}, -1.0f + 0.4f * k, 0.13f)}});
  Quantized q = Quantize(path, feeds);
  const std::map<std::string, int> counts = QuantizeNodesByScope(q.model);
  // Scan outputs are named "last" first: the scope key is "<last>".
  EXPECT_EQ(counts.at("<last>.body"), 2);                 // a and wk
  EXPECT_EQ(q.observed.at("<last>.body::a"), 3 * 5 * 4);  // samples x steps x values
  const quant::TensorQuant* w = q.plan.Find("<last>.body::wk");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->role, quant::TensorRole::kWeight);
  EXPECT_EQ(w->axis, 1);  // MatMul: the weight's output columns
  EXPECT_LT(RelativeMaxError(path, std::move(q.model), feeds), testing::kInt8TinyModelRelMax);
}

}  // namespace
}  // namespace quantkit
