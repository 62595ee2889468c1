// Rewrites an integer-operator (QOperator) model, as onnxruntime.quantization writes it
// (quantize_static with QuantFormat.QOperator, quantize_dynamic), into the equivalent Q/DQ model,
// so ExtractQdqPlan reads its scales and StripQdq yields its float model:
//
//   QLinearConv(xq, xs, xz, Wq, ws, wz, ys, yz, Bq)  ->  Q(Conv(DQ(xq), DQ(Wq, axis 0), B), ys, yz)
//   QLinearMatMul / QGemm                            ->  Q(MatMul | Gemm(DQ(a), DQ(b), C), ys, yz)
//   QLinearAdd/Mul/Sigmoid/LeakyRelu/Softmax/AveragePool/GlobalAveragePool/Concat (com.microsoft)
//                                                    ->  Q(float op(DQ(inputs...)), ys, yz)
//   ConvInteger/MatMulInteger(xq, Wq, xz, wz) -> Cast -> Mul(., xs*ws)
//                                                    ->  Conv | MatMul(x, DQ(Wq, ws, wz))
//      where xq = DynamicQuantizeLinear(x) (dynamic: x has no static scale; reported) or
//      xq = QuantizeLinear(x, xs, xz) (static: x keeps its Q/DQ pair, ws = (xs*ws) / xs)
//   shape ops on integer tensors (MaxPool, Reshape, Flatten, Transpose, ...)
//                                                    ->  Q(op(DQ(xq)), same scale and zero point)
//
// An output grid whose lowest code is 0 (zero point == qmin) saturates negatives: onnxruntime
// fuses Relu that way, so the float op gets an explicit Relu after it (exact for the integer
// model; onnxruntime also folds Clip(0, 6)'s upper bound into the grid, which the Q/DQ model
// keeps). Integer biases (int32, scale = x_scale * w_scale [* alpha for QGemm]) become float
// initializers; integer weights stay behind a DequantizeLinear (per channel along the
// output-channel axis; a per-tensor weight scale is repeated per channel, which is the same grid)
// so their scales reach the plan. Float tensors take the integer tensor's name without
// onnxruntime's "_quantized" suffix where that name is free, so the float model's names match the
// original float model. Every integer activation ends up read through exactly one DQ, so every Q ->
// DQ is a fake-quantization pair for StripQdq. Inputs that are integer graph inputs are
// unsupported.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// True when the graph has an op this pass converts (QLinear*, QGemm, ConvInteger, MatMulInteger,
// DynamicQuantizeLinear).
bool HasIntegerOps(const ir::Graph& graph);

// PyTorch's ONNX export of FX convert_fx models (torch 1.13) writes Q/DQ with two quirks that
// hide the pairs from FindQdqUnits:
//   Q(x) -> Cast(to = Q's own dtype) -> DQ        (a no-op Cast)   ==> Q(x) -> DQ
//   DQ(b_int32, s, Cast(ConstantOfShape(shape)))  (run-time zero)   ==> constant zero point
//   Q/DQ without axis, scale or zero point of shape [1] (per tensor)  ==> rank-0 copies
// Folds them (ConstantOfShape/Cast of constants become initializers). Counts "folded" (nodes
// removed); harmless on models without them.
class NormalizeTorchQdq final : public Pass {
 public:
  const char* Name() const override { return "normalize_torch_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

// Rewrites in place. On error (unsupported op or pattern; the message names the node) the model
// may be partly rewritten: callers work on a copy they can discard (convert loads it from disk).
// Counts "nodes_converted" (integer ops replaced by float ops), "passthrough_nodes" (shape ops
// moved from integer to float tensors) and "relus_restored" (Relus onnxruntime had fused into an
// op's output saturation); lists "dynamic_tensors" (float tensors quantized by
// DynamicQuantizeLinear); notes what a user should check.
class QOperatorToQdq final : public Pass {
 public:
  const char* Name() const override { return "qoperator_to_qdq"; }
  Status Run(ir::Model& model, PassReport* report) const override;
};

}  // namespace quantkit::passes
