// --method auto per tensor (pipelines/calibrate/auto_method.h): the greedy pass over the tensors
// whose ranges differ across methods, with a scorer standing in for the held-out simulation.
#include "pipelines/calibrate/auto_method.h"

#include <gtest/gtest.h>

namespace quantkit::pipelines {
namespace {

const quant::MethodRequest kMax{quant::CalibMethod::kMax};
const quant::MethodRequest kMse{quant::CalibMethod::kMse};
const quant::MethodRequest kEntropy{quant::CalibMethod::kEntropy};

// Activations a, b, c, u: the methods disagree on a (x2) and b (x1.2), agree on c, and u is the
// user's override.
struct Fixture {
  CalibrationSites sites;
  std::vector<quant::MethodRequest> methods{kMax, kMse, kEntropy};
  std::vector<quant::QuantPlan> plans;
  Fixture() {
    sites.activations = {"a", "b", "c", "u"};
    const std::map<std::string, std::vector<float>> amax = {
        {"a", {8, 4, 4}}, {"b", {6, 5, 5.5f}}, {"c", {3, 3.01f, 3}}, {"u", {9, 1, 1}}};
    for (size_t m = 0; m < methods.size(); ++m) {
      quant::QuantPlan p;
      for (const auto& [t, v] : amax) p.SetActivationAmax(t, v[m], quant::MethodLabel(methods[m]));
      plans.push_back(p);
    }
  }
};

TEST(AutoPerTensor, KeepsOnlyChangesThatImproveTheHeldOutScore) {
  Fixture f;
  MethodChoice start{kMax, {{"u", kEntropy}}};
  std::vector<MethodChoice> tried;
  // a is better with mse (loss 0.5 -> 0.2); b with entropy only makes things worse.
  PlanScorer score = [&](const MethodChoice& c) -> Result<PlanScore> {
    tried.push_back(c);
    double loss = 0.5;
    if (c.overrides.count("a") && c.overrides.at("a") == kMse) loss -= 0.3;
    if (c.overrides.count("b") && c.overrides.at("b") == kEntropy) loss += 0.1;
    return PlanScore{loss, loss / 10};
  };
  auto r = ChoosePerTensor(f.sites, f.methods, f.plans, start, {0.5, 0.05}, score);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Candidates: a and b (c's ranges agree within kAutoMinAmaxSpread; u is the user's).
  EXPECT_EQ(r->candidates, 2);
  EXPECT_EQ(r->trials, 4);  // two other methods for each candidate
  ASSERT_EQ(r->changes.size(), 1u);
  EXPECT_EQ(r->changes[0].tensor, "a");
  EXPECT_EQ(r->changes[0].from, "max");
  EXPECT_EQ(r->changes[0].to, "mse");
  EXPECT_DOUBLE_EQ(r->score.loss, 0.2);
  EXPECT_TRUE(r->methods.overrides.at("a") == kMse);
  EXPECT_FALSE(r->methods.overrides.count("b"));
  EXPECT_TRUE(r->methods.overrides.at("u") == kEntropy);  // never revisited
  // The largest spread (a, x2) is tried first; c and u never.
  ASSERT_FALSE(tried.empty());
  EXPECT_TRUE(tried.front().overrides.count("a"));
  for (const MethodChoice& c : tried) {
    EXPECT_FALSE(c.overrides.count("c"));
    EXPECT_TRUE(c.overrides.at("u") == kEntropy);
  }
}

TEST(AutoPerTensor, StopsAtTheTrialBound) {
  Fixture f;
  int calls = 0;
  PlanScorer score = [&](const MethodChoice&) -> Result<PlanScore> {
    ++calls;
    return PlanScore{1.0, 1.0};  // nothing helps
  };
  auto r =
      ChoosePerTensor(f.sites, f.methods, f.plans, {kMax, {}}, {1.0, 1.0}, score, /*max_trials=*/3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r->trials, 3);
  EXPECT_TRUE(r->changes.empty());
  EXPECT_TRUE(r->methods.overrides.empty());
}

// The repair ladder's time cap: out_of_time is asked before each trial, and the pass ends with the
// best choice so far (here the first trial's improvement), marked stopped.
TEST(AutoPerTensor, OutOfTimeEndsThePassWithTheBestSoFar) {
  Fixture f;
  int calls = 0;
  PlanScorer score = [&](const MethodChoice& c) -> Result<PlanScore> {
    ++calls;
    const double loss = c.overrides.count("a") && c.overrides.at("a") == kMse ? 0.2 : 0.5;
    return PlanScore{loss, loss / 10};
  };
  const MethodChoice start{kMax, {{"u", kEntropy}}};  // so a (x2) is the first candidate
  auto r = ChoosePerTensor(f.sites, f.methods, f.plans, start, {0.5, 0.05}, score,
                           kAutoMaxTensorTrials, [&] { return calls >= 1; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r->trials, 1);
  EXPECT_TRUE(r->stopped);
  ASSERT_EQ(r->changes.size(), 1u);
  EXPECT_TRUE(r->methods.overrides.at("a") == kMse);
  EXPECT_DOUBLE_EQ(r->score.loss, 0.2);
  // Never out of time: every trial runs and the pass is not marked stopped.
  calls = 0;
  auto full = ChoosePerTensor(f.sites, f.methods, f.plans, start, {0.5, 0.05}, score,
                              kAutoMaxTensorTrials, [] { return false; });
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->trials, 4);
  EXPECT_FALSE(full->stopped);
}

TEST(AutoPerTensor, AScorerFailureIsReturned) {
  Fixture f;
  PlanScorer score = [](const MethodChoice&) -> Result<PlanScore> {
    return Status(StatusCode::kInvalidArgument, "holdout broke");
  };
  auto r = ChoosePerTensor(f.sites, f.methods, f.plans, {kMax, {}}, {1.0, 1.0}, score);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantkit::pipelines
