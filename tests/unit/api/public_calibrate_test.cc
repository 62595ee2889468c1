// quantkit::Calibrate as the one front door of `quantkit calibrate` (issue 28): every option the
// CLI has is a field of CalibrateOptions, checked before any compute, and reaches what is written
// (the PTQ stages, the float part, the budget search). Only quantkit/ headers are included here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "quantkit/calibration.h"
#include "quantkit/pipelines.h"

namespace quantkit {
namespace {
namespace fs = std::filesystem;

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

// Options that pass every check; each case below breaks one field.
CalibrateOptions Valid(const fs::path& dir) {
  CalibrateOptions o;
  o.model = (dir / "missing.onnx").string();  // never read: the checks come first
  o.data = "fashion-mnist:calib";
  o.output_dir = (dir / "out").string();
  return o;
}

TEST(PublicCalibrate, EveryOptionIsCheckedBeforeAnythingIsRead) {
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_calibrate_checks";
  fs::remove_all(dir);
  ASSERT_TRUE(CheckCalibrateOptions(Valid(dir)).ok());
  struct Case {
    const char* what;
    void (*breaks)(CalibrateOptions*);
    const char* message;  // a part of the one-line error
  };
  const std::vector<Case> cases = {
      {"unknown stage", [](CalibrateOptions* o) { o->ptq.stages = "adaround,rounding"; },
       "rounding"},
      {"stage parameter out of range",
       [](CalibrateOptions* o) { o->ptq.stages = "adaround:iterations=0"; }, "iterations"},
      {"stages out of order", [](CalibrateOptions* o) { o->ptq.stages = "adaround,seqmse"; },
       "seqmse"},
      {"ptq memory", [](CalibrateOptions* o) { o->ptq.memory_mib = 0; }, "ptq-memory"},
      {"ptq samples", [](CalibrateOptions* o) { o->ptq.samples = 0; }, "samples"},
      {"ptq batch", [](CalibrateOptions* o) { o->ptq.batch = -3; }, "batch"},
      {"float dtype", [](CalibrateOptions* o) { o->floats.dtype = "fp8"; }, "fp8"},
      {"weight storage", [](CalibrateOptions* o) { o->floats.weight_storage = "int4"; }, "int4"},
      {"budget with auto",
       [](CalibrateOptions* o) {
         o->methods.method = "auto";
         o->budget = 0.5;
       },
       "--budget"},
      {"budget with compare",
       [](CalibrateOptions* o) {
         o->compare_methods = true;
         o->budget = 0.5;
       },
       "--compare-methods"},
      {"negative budget", [](CalibrateOptions* o) { o->budget = -1; }, "-1"},
      {"NaN budget",
       [](CalibrateOptions* o) { o->budget = std::numeric_limits<double>::quiet_NaN(); }, "nan"},
      {"distributed timeout", [](CalibrateOptions* o) { o->distributed.timeout_seconds = 0.5; },
       "timeout"},
      {"holdout samples", [](CalibrateOptions* o) { o->holdout_samples = -1; }, "holdout_samples"},
      {"check samples", [](CalibrateOptions* o) { o->check_samples = -2; }, "check_samples"},
      {"method", [](CalibrateOptions* o) { o->methods.method = "automatic"; }, "automatic"},
      {"auto's override",
       [](CalibrateOptions* o) {
         o->methods.method = "auto";
         o->methods.overrides["Conv"] = "percentile:101";
       },
       "101"},
  };
  for (const Case& c : cases) {
    CalibrateOptions o = Valid(dir);
    c.breaks(&o);
    const Status checked = CheckCalibrateOptions(o);
    ASSERT_FALSE(checked.ok()) << c.what;
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument) << c.what << ": " << checked.ToString();
    EXPECT_NE(checked.message().find(c.message), std::string::npos)
        << c.what << ": " << checked.message();
    // Calibrate refuses the same way, before the (missing) model is opened.
    auto r = Calibrate(o);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().message(), checked.message()) << c.what;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(PublicCalibrate, StagesFloatPartAndTextReachTheArtifacts) {
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_calibrate_stages";
  fs::remove_all(dir);
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.data_options.samples = 48;
  o.output_dir = (dir / "out").string();
  o.check_samples = 16;
  o.ptq.stages = "bias-correction";  // changes the weights: the float model is written too
  o.ptq.samples = 16;
  o.ptq.batch = 8;
  o.floats.dtype = "fp32";
  auto r = Calibrate(o);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << r.status().message();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fs::exists(dir / "out" / "model.float.onnx"));
  EXPECT_NE(r->summary.find("bias-correction"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("float dtype: fp32"), std::string::npos) << r->summary;
  // The CLI's stdout: the summary, then one line per file written.
  EXPECT_EQ(r->text.rfind(r->summary, 0), 0u) << r->text;
  for (const std::string& f : r->written)
    EXPECT_NE(r->text.find("wrote " + f + "\n"), std::string::npos) << f;
  EXPECT_FALSE(r->within_budget.has_value());
  EXPECT_TRUE(r->check.ran);
  EXPECT_EQ(r->world_size, 1);
  EXPECT_TRUE(r->rank_line.empty());

  // --int8 off: the float-dtype conversion alone, no Q/DQ model.
  CalibrateOptions f = o;
  f.ptq.stages.clear();
  f.floats.dtype = "fp16";
  f.floats.int8 = false;
  f.output_dir = (dir / "fp16").string();
  auto fp16 = Calibrate(f);
  ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
  EXPECT_TRUE(fs::exists(dir / "fp16" / "model.fp16.onnx"));
  EXPECT_FALSE(fs::exists(dir / "fp16" / "model.qdq.onnx"));
}

TEST(PublicCalibrate, BudgetSearchReportsWhetherItWasReached) {
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_calibrate_budget";
  fs::remove_all(dir);
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.data_options.samples = 64;
  o.output_dir = (dir / "out").string();
  o.methods.method = "entropy";
  o.metric = "rel_mse";
  o.budget = 100;  // any plan is within a ratio of 100: the search keeps nothing in float
  auto r = Calibrate(o);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << r.status().message();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->within_budget.has_value());
  EXPECT_TRUE(*r->within_budget);
  EXPECT_NE(r->text.find("budget: fallback search on held-out"), std::string::npos) << r->text;
  EXPECT_NE(r->text.find("final plan: 0 layer(s) kept in float"), std::string::npos) << r->text;
  EXPECT_TRUE(fs::exists(dir / "out" / "fallback.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "layer_precisions.txt"));
  // summary.txt is the report without the "wrote" lines.
  EXPECT_EQ(r->summary.find("wrote "), std::string::npos) << r->summary;
}

// convert and lint as the CLI runs them: a plan.json to a Q/DQ model with the float part asked
// for, its layer-precision string, and lint's verdict and exit code on what was written.
TEST(PublicCalibrate, ConvertWritesTheFloatPartAskedForAndLintJudgesIt) {
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_convert";
  fs::remove_all(dir);
  CalibrateOptions o;
  o.model = kModel;
  o.data = "fashion-mnist:calib";
  o.data_options.samples = 32;
  o.check_samples = 0;
  o.output_dir = (dir / "cal").string();
  auto calibrated = Calibrate(o);
  if (!calibrated.ok() && calibrated.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << calibrated.status().message();
  }
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().ToString();

  ConvertOptions c;
  c.input = (dir / "cal" / "plan.json").string();
  c.output = (dir / "fp32.qdq.onnx").string();
  c.model = kModel;
  c.floats.dtype = "fp32";
  c.cache.calibrator = "MinMaxCalibration";
  auto converted = Convert(c);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_TRUE(fs::exists(c.output));
  EXPECT_NE(converted->json.find("written"), std::string::npos) << converted->json;

  auto linted = Lint({c.output});
  ASSERT_TRUE(linted.ok()) << linted.status().ToString();
  EXPECT_GT(linted->quantize_nodes, 0);
  // INT8-stored weights have a DequantizeLinear and no QuantizeLinear.
  EXPECT_GT(linted->dequantize_nodes, linted->quantize_nodes);
  EXPECT_NE(linted->worst, "error") << linted->text;
  EXPECT_EQ(linted->exit_code, linted->worst == "warning" ? 1 : 0) << linted->text;
  EXPECT_FALSE(linted->text.empty());

  // Options checked before anything is written.
  for (auto breaks : {+[](ConvertOptions* x) { x->float_precision = "fp8"; },
                      +[](ConvertOptions* x) { x->floats.int8 = false; },
                      +[](ConvertOptions* x) { x->floats.dtype = "fp64"; },
                      +[](ConvertOptions* x) { x->cache.calibrator = "Legacy"; },
                      +[](ConvertOptions* x) { x->batch_size = 0; }}) {
    ConvertOptions bad = c;
    bad.output = (dir / "bad.onnx").string();
    breaks(&bad);
    auto r = Convert(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_FALSE(fs::exists(bad.output));
  }
  // lint of a file that is not there names it.
  auto missing = Lint({(dir / "none.onnx").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.onnx"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace quantkit
