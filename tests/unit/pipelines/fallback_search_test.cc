#include "pipelines/evaluate/fallback_search.h"

#include <gtest/gtest.h>

#include <map>

namespace quantkit::pipelines {
namespace {

// A synthetic evaluator: the loss of each set is given; unlisted sets cost `other`.
struct TableLoss {
  std::map<FloatSet, double> table;
  double other = 100;
  int calls = 0;
  LossFn fn() {
    return [this](const FloatSet& s) -> Result<double> {
      ++calls;
      auto it = table.find(s);
      return it == table.end() ? other : it->second;
    };
  }
};

TEST(FallbackSearch, AdditiveLossesPickTheBiggestOffendersOnly) {
  // Each quantized layer adds its cost; keeping it in float removes it.
  const std::map<std::string, double> cost{{"a", 5}, {"b", 0.3}, {"c", 0.2}, {"d", 2}};
  LossFn loss = [&](const FloatSet& s) -> Result<double> {
    double l = 0;
    for (const auto& [k, v] : cost) l += s.count(k) ? 0 : v;
    return l;
  };
  auto r = SearchFallback({"a", "b", "c", "d"}, loss, {0.5, 0, {}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->baseline_loss, 7.5);
  ASSERT_EQ(r->ranking.size(), 4u);
  EXPECT_EQ(r->ranking[0].layer, "a");
  EXPECT_EQ(r->ranking[1].layer, "d");
  EXPECT_EQ(r->float_layers, (FloatSet{"a", "d"}));
  EXPECT_DOUBLE_EQ(r->loss, 0.5);
  EXPECT_TRUE(r->within_budget);
}

TEST(FallbackSearch, RefineDropsAGreedyPickThatInteractionsMadeUnneeded) {
  TableLoss t;
  t.table = {{{}, 10},          {{"p"}, 4},      {{"q"}, 5},
             {{"r"}, 9},        {{"p", "q"}, 1}, {{"p", "q", "r"}, 0.3},
             {{"p", "r"}, 0.4}, {{"q", "r"}, 3}};
  auto r = SearchFallback({"r", "q", "p"}, t.fn(), {0.5, 0, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ranking[0].layer, "p");
  EXPECT_EQ(r->ranking[2].layer, "r");
  // Greedy takes p, q, r (0.3); refine removes q since {p, r} = 0.4 is within budget.
  EXPECT_EQ(r->float_layers, (FloatSet{"p", "r"}));
  EXPECT_DOUBLE_EQ(r->loss, 0.4);
  bool refined_q = false;
  for (const SearchStep& s : r->steps)
    refined_q |= s.phase == "refine" && s.layer == "q" && s.accepted;
  EXPECT_TRUE(refined_q);
  // Memoized: {p} is evaluated in the ranking and again as the first greedy step.
  EXPECT_EQ(r->evaluations, t.calls);
  EXPECT_LT(t.calls, static_cast<int>(r->steps.size()));
}

TEST(FallbackSearch, WithinBudgetAlreadyNeedsOneEvaluation) {
  TableLoss t;
  t.table = {{{}, 0.2}};
  auto r = SearchFallback({"a", "b"}, t.fn(), {0.5, 0, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->within_budget);
  EXPECT_TRUE(r->float_layers.empty());
  EXPECT_EQ(t.calls, 1);
}

TEST(FallbackSearch, UnreachableBudgetIsReportedNotFaked) {
  TableLoss t;
  t.table = {{{}, 10}, {{"a"}, 8}, {{"b"}, 9}, {{"a", "b"}, 7}};
  auto r = SearchFallback({"a", "b"}, t.fn(), {0.5, 0, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->within_budget);
  EXPECT_DOUBLE_EQ(r->loss, 7);
  EXPECT_EQ(r->float_layers, (FloatSet{"a", "b"}));
}

TEST(FallbackSearch, LayersThatDoNotHelpAreNotKept) {
  // Keeping "noise" in float changes nothing: greedy must not take it.
  LossFn loss = [](const FloatSet& s) -> Result<double> { return s.count("bad") ? 0.1 : 3.0; };
  auto r = SearchFallback({"noise", "bad"}, loss, {0.5, 0, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->float_layers, FloatSet{"bad"});
}

TEST(FallbackSearch, MaxFloatLayersAndErrorsPropagate) {
  const std::map<std::string, double> cost{{"a", 5}, {"b", 3}};
  LossFn loss = [&](const FloatSet& s) -> Result<double> {
    double l = 0;
    for (const auto& [k, v] : cost) l += s.count(k) ? 0 : v;
    return l;
  };
  auto r = SearchFallback({"a", "b"}, loss, {0.5, 1, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->float_layers, FloatSet{"a"});
  EXPECT_FALSE(r->within_budget);

  LossFn failing = [](const FloatSet& s) -> Result<double> {
    if (s.count("x")) return Status(StatusCode::kInvalidArgument, "trial failed");
    return 5.0;
  };
  EXPECT_FALSE(SearchFallback({"x"}, failing, {0.5, 0, {}}).ok());
  EXPECT_FALSE(SearchFallback({"x"}, failing, {-1, 0, {}}).ok());
}

TEST(FallbackSearch, OutOfTimeStopsWithTheBestSetSoFar) {
  // "a" alone is within budget, but time runs out after the baseline and two rank trials: the
  // search keeps what it found (nothing accepted yet) and says it was stopped.
  TableLoss t;
  t.table = {{{}, 10}, {{"a"}, 0.1}, {{"b"}, 9}, {{"c"}, 9}};
  int asked = 0;
  auto r = SearchFallback({"b", "c", "a"}, t.fn(), {0.5, 0, [&] { return ++asked > 2; }});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(t.calls, 3);  // baseline, b, c: never a
  EXPECT_FALSE(r->within_budget);
  EXPECT_TRUE(r->float_layers.empty());
  EXPECT_DOUBLE_EQ(r->loss, 10);

  // Never out of time: the same search finds "a".
  TableLoss full;
  full.table = t.table;
  auto done = SearchFallback({"b", "c", "a"}, full.fn(), {0.5, 0, [] { return false; }});
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->stopped);
  EXPECT_EQ(done->float_layers, FloatSet{"a"});
}

}  // namespace
}  // namespace quantkit::pipelines
