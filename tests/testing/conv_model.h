// The smallest trainable model of the QAT checkpoint tests and the checkpoint fuzzer (test-only,
// no gtest: the fuzzer includes it too).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace quantkit::testing {

// y = Conv(x, W), x: float[N,1,4,4], W: [channels,1,3,3] with W[i] = (i % 5) - 2 + shift (a student
// and its teacher differ by `shift`). A node that cannot be added leaves the graph without output,
// which every caller's first use then reports.
inline ir::Model TinyConvModel(float shift = 0.0f, int64_t channels = 2) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Symbolic("N"), ir::Dim::Known(1),
                                                     ir::Dim::Known(4), ir::Dim::Known(4)});
  g.AddInput(x);
  std::vector<float> w(static_cast<size_t>(channels * 9));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2.0f + shift;
  ir::Value* weight =
      g.AddInitializer("W", ir::Tensor::FromVector(ir::DType::kFloat, {channels, 1, 3, 3}, w));
  auto conv = g.AddNode("Conv", {x, weight}, {"y"}, "", "conv");
  if (conv.ok()) g.AddOutput((*conv)->output(0));
  return m;
}

}  // namespace quantkit::testing
