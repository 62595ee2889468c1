// QAT validation's choice of the kept step (pipelines/qat/validation.cc) and its hold-out size
// (data.cc). Keep-the-best used to compare top-1/agreement alone with `>`: a run whose agreement
// stayed at 100% (a saturated classifier) or at 1 of 8 (argmax over a [batch, time, classes]
// output) kept step 0, the PTQ model, however far the output error fell. These tests pin the
// lexicographic rule that replaced it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/metrics.h"

#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {
namespace {

QatScore Score(double metric, std::optional<double> tiebreak = std::nullopt) {
  return {metric, tiebreak};
}

TEST(QatValidationTest, TheMetricDecidesWhenItDiffers) {
  // Higher is better (top1, agreement): a better share wins whatever its output error.
  EXPECT_TRUE(Better(Score(0.90, 0.5), Score(0.80, 0.001), /*higher_is_better=*/true));
  EXPECT_FALSE(Better(Score(0.80, 0.001), Score(0.90, 0.5), /*higher_is_better=*/true));
  // Lower is better (rel_mse, no tie-breaker).
  EXPECT_TRUE(Better(Score(1e-3), Score(3e-3), /*higher_is_better=*/false));
  EXPECT_FALSE(Better(Score(3e-3), Score(1e-3), /*higher_is_better=*/false));
}

TEST(QatValidationTest, TiesOnTheMetricAreBrokenByTheOutputError) {
  // Without the tie-breaker a tie never replaced the kept (earlier) step: 100% -> 100% kept the
  // PTQ start although the output moved closer to FP32.
  EXPECT_TRUE(Better(Score(1.0, 2e-3), Score(1.0, 5e-3), /*higher_is_better=*/true));
  EXPECT_FALSE(Better(Score(1.0, 5e-3), Score(1.0, 2e-3), /*higher_is_better=*/true));
  // An exact tie on both keeps the earlier step (no churn, the earliest such step is kept).
  EXPECT_FALSE(Better(Score(0.125, 2e-3), Score(0.125, 2e-3), /*higher_is_better=*/true));
  // A score with a tie-breaker beats one without (a checkpoint written before tie-breakers).
  EXPECT_TRUE(Better(Score(1.0, 2e-3), Score(1.0), /*higher_is_better=*/true));
  EXPECT_FALSE(Better(Score(1.0), Score(1.0, 2e-3), /*higher_is_better=*/true));
}

TEST(QatValidationTest, ADivergedStepIsNeverKept) {
  // rel_mse of NaN outputs is NaN: a plain `<` would make every comparison false, so a NaN kept
  // step could never be replaced, and a NaN step must never replace a finite one.
  EXPECT_FALSE(Better(Score(NAN), Score(3e-3), /*higher_is_better=*/false));
  EXPECT_TRUE(Better(Score(3e-3), Score(NAN), /*higher_is_better=*/false));
  EXPECT_FALSE(Better(Score(1.0, NAN), Score(1.0, 3e-3), /*higher_is_better=*/true));
  EXPECT_TRUE(Better(Score(1.0, 3e-3), Score(1.0, NAN), /*higher_is_better=*/true));
  // An infinite error (a zero FP32 output, a non-zero student) loses to any finite one.
  EXPECT_TRUE(Better(Score(3e-3), Score(INFINITY), /*higher_is_better=*/false));
}

TEST(QatValidationTest, TheMetricFollowsTheOutputShapeAsInAnalyzeAndFallback) {
  // The one rule (analysis::MakeOutputAwareMetric) that OpenValidation applies to the FP32
  // teacher's first output: argmax metrics only for a [batch, classes] vector.
  auto chosen = [](const std::vector<int64_t>& dims, bool has_labels) {
    return analysis::MakeOutputAwareMetric("", has_labels, analysis::IsClassOutput(dims))
        .value()
        ->name();
  };
  EXPECT_EQ(chosen({8, 10}, /*has_labels=*/true), "top1");
  EXPECT_EQ(chosen({8, 10}, /*has_labels=*/false), "agreement");
  // The PP-OCRv4 recognizer's [batch, time, classes]: argmax agreement there was 1 of 8 at
  // every step (issue 31); the output error is what moves.
  EXPECT_EQ(chosen({8, 40, 6625}, /*has_labels=*/false), "rel_mse");
  EXPECT_EQ(chosen({8, 40, 6625}, /*has_labels=*/true), "rel_mse");
  EXPECT_EQ(chosen({8, 1}, /*has_labels=*/false), "rel_mse");          // a score
  EXPECT_EQ(chosen({8, 1, 64, 64}, /*has_labels=*/false), "rel_mse");  // a map
  EXPECT_EQ(chosen({8}, /*has_labels=*/false), "rel_mse");
  // --metric overrides the rule; an unknown name is an error, not a silent default.
  EXPECT_EQ(analysis::MakeOutputAwareMetric("agreement", false, false).value()->name(),
            "agreement");
  EXPECT_FALSE(analysis::MakeOutputAwareMetric("bogus", false, true).ok());
  // Lower is better for rel_mse, so keep-the-best must not compare it with `>`.
  EXPECT_FALSE(analysis::MakeMetric("rel_mse").value()->higher_is_better());
}

TEST(QatValidationTest, KeepingThePtqStartIsNeverSilent) {
  QatOptions o;
  TrainingData data;
  QatResult r;
  r.metric = "agreement";
  r.tiebreak = "rel_mse";
  r.val_data = "val.npy, 16 samples";
  r.steps = 8;
  r.val_ptq = r.val_best = Score(1.0, 2e-3);
  r.best_step = 0;
  AddWarnings(o, data, &r);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(
      r.warnings[0].find(
          "no step beat the PTQ start on agreement (then rel_mse vs FP32): wrote the PTQ model"),
      std::string::npos)
      << r.warnings[0];
  // A later step kept: nothing to warn about.
  QatResult later = r;
  later.warnings.clear();
  later.best_step = 4;
  AddWarnings(o, data, &later);
  EXPECT_TRUE(later.warnings.empty());
  // Nothing validated the run: said, with why.
  QatResult none;
  o.holdout = 0;
  AddWarnings(o, data, &none);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("not validated (no --val, --holdout 0)"), std::string::npos)
      << none.warnings[0];
}

TEST(QatValidationTest, HoldoutSize) {
  // --val given: nothing is held out, and an explicit --holdout beside it is an error.
  EXPECT_EQ(*HoldoutSize(QatOptions::kAutoHoldout, 1000, 64, /*has_val=*/true), 0);
  EXPECT_FALSE(HoldoutSize(100, 1000, 64, /*has_val=*/true).ok());
  // Automatic: 10%, at most kMaxAutoHoldout, only while a batch is left to train on.
  EXPECT_EQ(*HoldoutSize(QatOptions::kAutoHoldout, 1000, 64, /*has_val=*/false), 100);
  EXPECT_EQ(*HoldoutSize(QatOptions::kAutoHoldout, 128, 8, /*has_val=*/false),
            12);  // the 128 text lines
  EXPECT_EQ(*HoldoutSize(QatOptions::kAutoHoldout, 50000, 64, /*has_val=*/false), kMaxAutoHoldout);
  EXPECT_EQ(*HoldoutSize(QatOptions::kAutoHoldout, 128, 128, /*has_val=*/false), 0);
  // Explicit: as asked, or an error when no batch would be left.
  EXPECT_EQ(*HoldoutSize(0, 1000, 64, /*has_val=*/false), 0);
  EXPECT_EQ(*HoldoutSize(500, 1000, 64, /*has_val=*/false), 500);
  EXPECT_FALSE(HoldoutSize(950, 1000, 64, /*has_val=*/false).ok());
}

}  // namespace
}  // namespace quantkit::pipelines::qat
