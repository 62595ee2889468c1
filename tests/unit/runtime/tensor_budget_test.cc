// runtime/tensor_budget.h (issue #27 item 4): a model run cannot allocate a tensor beyond the
// budget, checked before the allocation, naming the node; the budget follows the model and its
// inputs, or the user's limit.
#include "runtime/tensor_budget.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "ir/graph.h"
#include "runtime/interpreter.h"

namespace quantkit::runtime {
namespace {

using ir::Dim;
using ir::DType;

long PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// y = ConstantOfShape([count]) + x, x: float[1].
ir::Model ConstantOfShapeModel(int64_t count) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(DType::kFloat, {Dim::Known(1)});
  g.AddInput(x);
  ir::Value* shape =
      g.AddInitializer("shape", ir::Tensor::FromVector<int64_t>(DType::kInt64, {1}, {count}));
  auto c = g.AddNode("ConstantOfShape", {shape}, {"c"}, "", "giant");
  EXPECT_TRUE(c.ok());
  auto y = g.AddNode("Add", {(*c)->output(0), x}, {"y"}, "", "add");
  EXPECT_TRUE(y.ok());
  g.AddOutput((*y)->output(0));
  return m;
}

Result<std::vector<NamedTensor>> RunOnce(int64_t count) {
  auto it = Interpreter::Create(ConstantOfShapeModel(count));
  if (!it.ok()) return it.status();
  return (*it)->Run({{"x", ir::Tensor::FromVector<float>(DType::kFloat, {1}, {1.0f})}});
}

TEST(TensorBudget, ATinyModelCannotAskForGigabytes) {
  const long before = PeakRssKb();
  // 750 M floats: 3 GB asked by a model of a few hundred bytes.
  auto r = RunOnce(750000000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("'giant'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ConstantOfShape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2861.0 MiB exceeds the per-tensor budget of 1024.0 MiB"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--max-tensor-mb"), std::string::npos) << msg;
  EXPECT_LT(PeakRssKb() - before, 512 * 1024) << "refused before the allocation";
  // Within the budget the same model runs.
  auto ok = RunOnce(1000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->front().tensor.numel(), 1000);
}

TEST(TensorBudget, TheBudgetFollowsTheModelAndTheUserLimit) {
  ASSERT_TRUE(SetMaxTensorMb(0).ok());
  EXPECT_EQ(TensorBudgetBytes(0).value(), kTensorBudgetFloorBytes);
  EXPECT_EQ(TensorBudgetBytes(100 << 20).value(),
            kTensorBudgetFactor * (100 << 20));                    // 6.4 GB for 100 MB in
  EXPECT_EQ(TensorBudgetBytes(INT64_MAX / 2).value(), INT64_MAX);  // no overflow
  ASSERT_TRUE(SetMaxTensorMb(1).ok());
  EXPECT_EQ(TensorBudgetBytes(100 << 20).value(), 1 << 20);
  auto r = RunOnce(1 << 20);  // 4 MiB > 1 MiB
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("1.0 MiB"), std::string::npos) << r.status().message();
  EXPECT_FALSE(SetMaxTensorMb(-1).ok());
  EXPECT_FALSE(SetMaxTensorMb(kMaxTensorBudgetMb + 1).ok());
  ASSERT_TRUE(SetMaxTensorMb(0).ok());
  EXPECT_TRUE(RunOnce(1 << 20).ok());
}

TEST(TensorBudget, OnlyRunsAreChecked) {
  // Outside a run (no scope) nothing is checked; a scope nests without widening.
  {
    TensorBudgetScope outer(1 << 20);
    {
      TensorBudgetScope inner(int64_t{1} << 40);  // a subgraph's run keeps the outer budget
      auto r = RunOnce(1 << 19);                  // 2 MiB > 1 MiB: refused under the outer scope
      EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
    }
  }
  EXPECT_TRUE(RunOnce(1 << 19).ok());
}

}  // namespace
}  // namespace quantkit::runtime
