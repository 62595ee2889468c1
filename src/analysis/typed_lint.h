// Lint rules for strongly typed networks (TensorRT 11 builds every network strongly typed: the
// ONNX types decide each layer's precision, and no builder flag changes them). Part of
// LintQdqModel (analysis/qdq_lint.h); the types are the model's declared ones completed by
// ir::InferShapes (initializers: their own).
//
// Rules (severity):
//   QK015 error    an op's inputs that share ONNX type T have different float types (float16 and
//                  float32 at an Add, a Conv with float16 data and a float32 weight): the model
//                  is not valid ONNX and a strongly typed build rejects it
//   QK016 error    QuantizeLinear whose input and scale types differ (TensorRT's Quantize takes
//                  its scale in its input's type)
//         warning  a Q/DQ pair whose DequantizeLinear scale type differs from the input's type:
//                  the pair changes the tensor's float type behind the user's back
//   QK017 warning  a Cast between a DequantizeLinear and its consumer: TensorRT fuses a
//                  DequantizeLinear into the layer that reads it, a Cast in between blocks the
//                  fusion and the layer runs in float
//   QK018 info     an FP32 island between 16-bit regions: float32 nodes entered only through
//                  Casts from float16/bfloat16 and left only through Casts back (two Casts per
//                  island, no fusion across them); intended where a layer was pinned to FP32
//   QK019 error    not valid ONNX though quantkit's runtime may run it (what onnx.checker and
//                  TensorRT's parser refuse): a Cast without `to` or to an unknown type, a
//                  QuantizeLinear / DequantizeLinear input of a type the opset does not define
//                  for it (a string tensor, bfloat16 before opset 19, a Q of a Q)
//   QK020 warning  a Cast round trip (A -> Cast(B) -> Cast(A)): the values change, two kernels
#pragma once

#include <vector>

#include "analysis/qdq_lint.h"
#include "ir/graph.h"

namespace quantkit::analysis {

// Appends the findings of QK015-QK020 for `model` (left unchanged: types are inferred on a copy).
void LintStronglyTyped(const ir::Model& model, std::vector<LintFinding>* findings);

}  // namespace quantkit::analysis
