// Reads the scales of a Q/DQ model into a QuantPlan keyed by the FLOAT tensors they quantize, so
// the plan's names match the model after StripQdq (and TensorRT's tensor names for that model):
//
//   x -Q(s,z)-> q -DQ-> y      : plan[x] = s      (activation per tensor, weight per channel)
//   W_q -DQ(s,z)-> y           : plan[y] = s      (stored int8 weights; y becomes the float weight)
//
// Asymmetric units (uint8 or non-zero zero points, as onnxruntime's QDQ writes them) are converted
// to the symmetric int8 range TensorRT requires, covering the same real interval:
//   [s*(qmin-z), s*(qmax-z)]  ->  amax = max(|lo|, |hi|),  scale = amax/127
// and the entry's reason says so (the conversion loses up to one bit of resolution).
//
// Propagation (ExtractOptions::propagate) gives every tensor TensorRT may ask for a scale where
// one is implied, to a fixpoint, through ops that preserve the quantization grid:
//   forward  y = op(x): Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity, MaxPool,
//                       Relu, a Cast between float types (an FP16 model's input Cast),
//                       Clip (output range is within the input's), Concat (equal scales)
//   backward x = input of op(x) = y: the same shape ops, MaxPool, Relu and float Casts; Clip when
//   its bounds
//                       lie within ±amax(y); Concat gives every unscaled input the output's scale.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

struct ExtractOptions {
  bool propagate = true;
};

struct ExtractReport {
  int activations = 0;
  int weights = 0;
  int propagated = 0;
  int converted_asymmetric = 0;
  std::vector<std::string> notes;  // one line per unit that could not be read
};

Result<quant::QuantPlan> ExtractQdqPlan(const ir::Graph& graph, const ExtractOptions& options,
                                        ExtractReport* report);

}  // namespace quantkit::passes
