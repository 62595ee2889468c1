// The pass contract (passes/pass.h), checked on every pass of passes/ and every zoo model:
//   - a pass reports `changed` exactly when it rewrote the model (the exported bytes differ);
//   - a normalizing pass is idempotent: its second run reports changed == false and leaves the
//     bytes as they were (without that, a workflow that loads a model twice, or a pipeline that
//     lists a pass twice, would quantize a different graph than the one it measured);
//   - every run leaves a model that passes ir::Verify;
//   - RunPasses runs in order, collects one report per pass, and stops at the first failing pass,
//     whose error names it (a user sees which rewrite refused, and no later pass runs on a model
//     the failing one may have left half-rewritten).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "ir/verifier.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "passes/fake_quant.h"
#include "passes/fold_constant_if.h"
#include "passes/fold_identity.h"
#include "passes/fold_weight_qdq.h"
#include "passes/pass.h"
#include "passes/promote_constants.h"
#include "passes/qop_to_qdq.h"
#include "passes/strip_qdq.h"

namespace quantkit::passes {
namespace {

std::string Zoo(const std::string& name) {
  return std::string(QK_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

std::string Bytes(const ir::Model& model) {
  auto bytes = onnx_io::ExportModelToBytes(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

bool HasQdq(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "QuantizeLinear" || n->op_type() == "DequantizeLinear") return true;
  }
  return false;
}

// Quantizes every activation site at one scale (ApplyPlan fills the weights): enough to put
// Q/DQ pairs everywhere TensorRT's placement would.
quant::QuantPlan EveryActivation(const ir::Graph& g) {
  quant::QuantPlan plan;
  auto sites = FindQdqSites(g, {});
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  for (const QdqSite& s : *sites) {
    if (s.role == quant::TensorRole::kActivation && !plan.Find(s.tensor)) {
      plan.SetScale(s.tensor, {0.05f}, -1, quant::TensorRole::kActivation, "test");
    }
  }
  return plan;
}

// Runs `pass` twice on `model` and checks the contract on both runs.
void ExpectContract(ir::Model& model, const Pass& pass, const std::string& where) {
  SCOPED_TRACE(where + ", pass " + pass.Name());
  const std::string start = Bytes(model);
  auto first = RunPass(model, pass);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->pass, pass.Name());
  EXPECT_TRUE(ir::Verify(model).ok());
  const std::string after_first = Bytes(model);
  EXPECT_EQ(first->changed, after_first != start)
      << "changed must say whether the model was rewritten";
  auto second = RunPass(model, pass);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->changed) << "a second run rewrote the model again";
  EXPECT_EQ(Bytes(model), after_first);
  EXPECT_TRUE(ir::Verify(model).ok());
}

class PassContract : public testing::TestWithParam<std::string> {};

TEST_P(PassContract, EveryPassReportsChangesAndIsIdempotent) {
  const std::string path = Zoo(GetParam());
  auto loaded = analysis::LoadModelForQuantization(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ir::Model& model = *loaded;

  // The float (or, for the QAT export, Q/DQ) model as every workflow loads it.
  const PromoteConstants promote;
  const FoldIdentityOfConstants fold_identity;
  const FoldConstantIf fold_if;
  const NormalizeTorchQdq normalize;
  const QOperatorToQdq qoperator;
  const FoldBatchNorm fold_bn;
  for (const Pass* pass : std::vector<const Pass*>{&promote, &fold_identity, &fold_if, &normalize,
                                                   &qoperator, &fold_bn}) {
    ExpectContract(model, *pass, GetParam());
  }

  // A Q/DQ model: ApplyPlan's output (or the QAT export as it came). Each Q/DQ pass gets its own
  // copy, re-read from the file.
  const bool qdq_source = HasQdq(*model.graph);
  auto qdq_model = [&]() -> ir::Model {
    auto m = analysis::LoadModelForQuantization(path);
    EXPECT_TRUE(m.ok());
    if (qdq_source) return std::move(*m);
    quant::QuantPlan plan = EveryActivation(*m->graph);
    auto inserted = RunPass(*m, ApplyPlan(&plan, {}));
    EXPECT_TRUE(inserted.ok()) << inserted.status().ToString();
    EXPECT_TRUE(inserted->changed);
    EXPECT_GT(inserted->Count(counter::kActivationPairs), 0);
    EXPECT_GT(inserted->Count(counter::kWeightPairs), 0);
    return std::move(*m);
  };
  const FoldWeightQdq fold_weights;
  const StripQdq strip;
  const QdqToFakeQuant fake_quant(FakeQuantOptions{});
  std::vector<const Pass*> qdq_passes{&fold_weights, &strip, &normalize};
  if (!qdq_source)
    qdq_passes.push_back(&fake_quant);  // QAT supports InsertQdq's symmetric int8 pairs
  for (const Pass* pass : qdq_passes) {
    ir::Model m = qdq_model();
    ExpectContract(m, *pass, GetParam() + " (Q/DQ)");
  }
  ir::Model stripped = qdq_model();
  auto strip_report = RunPass(stripped, strip);
  ASSERT_TRUE(strip_report.ok());
  EXPECT_TRUE(strip_report->changed);
  EXPECT_GT(strip_report->Count(counter::kPairsRemoved), 0);
  EXPECT_FALSE(HasQdq(*stripped.graph) && strip_report->Count(counter::kLeftInPlace) == 0);
}

INSTANTIATE_TEST_SUITE_P(Zoo, PassContract,
                         testing::Values("plain_cnn", "resnet_small", "mobilenetv2_small",
                                         "efficientnet_small", "vit_tiny", "resnet_small_qat"));

// A pass that counts its runs, and one that always refuses.
class Counting final : public Pass {
 public:
  explicit Counting(int* runs) : runs_(runs) {}
  const char* Name() const override { return "counting"; }
  Status Run(ir::Model&, PassReport* report) const override {
    ++*runs_;
    report->Add("runs", *runs_);
    return Status::Ok();
  }

 private:
  int* runs_;
};

class Refusing final : public Pass {
 public:
  const char* Name() const override { return "refusing"; }
  Status Run(ir::Model&, PassReport*) const override {
    return MakeStatus(StatusCode::kUnsupported, "node 'n' (Foo): not supported");
  }
};

TEST(PassRunner, RunsInOrderAndCollectsOneReportPerPass) {
  ir::Model model;
  int runs = 0;
  const Counting counting(&runs);
  const PromoteConstants promote;
  std::vector<PassReport> reports;
  ASSERT_TRUE(RunPasses(model, {&counting, &promote, &counting}, &reports).ok());
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[0].pass, "counting");
  EXPECT_EQ(reports[1].pass, "promote_constants");
  EXPECT_EQ(reports[2].Count("runs"), 2);
  EXPECT_EQ(FindReport(reports, "promote_constants"), &reports[1]);
  EXPECT_EQ(FindReport(reports, "no_such_pass"), nullptr);
}

TEST(PassRunner, AFailingPassStopsThePipelineAndNamesItself) {
  ir::Model model;
  int runs = 0;
  const Counting counting(&runs);
  const Refusing refusing;
  std::vector<PassReport> reports;
  const Status s = RunPasses(model, {&counting, &refusing, &counting}, &reports);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(), "pass 'refusing': node 'n' (Foo): not supported");
  EXPECT_EQ(runs, 1) << "a pass after the failing one ran";
  ASSERT_EQ(reports.size(), 1u);  // only the passes that finished
  EXPECT_EQ(reports[0].pass, "counting");
}

TEST(PassReport, AskingForACounterThePassNeverReportsIsAnError) {
  PassReport report;
  report.pass = "p";
  report.Add(counter::kFolded, 0);
  EXPECT_EQ(report.Count(counter::kFolded), 0);
  // A misspelt name must not read as 0 (diagnose once looked results up by string and got 0).
  EXPECT_THROW(report.Count("fodled"), InternalError);
  EXPECT_THROW(report.List(list::kSkipped), InternalError);
}

}  // namespace
}  // namespace quantkit::passes
