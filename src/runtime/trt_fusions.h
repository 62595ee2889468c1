// Where TensorRT keeps a tensor of an FP16 + INT8 network in FP32 because it fuses the nodes
// around it (ATen-free: the interpreter's float16 rules, runtime/float_precision.h, and the
// simulation's weight folding, passes/fold_weight_qdq.h, share them):
//
//   - a DequantizeLinear (or com.quantkit::FakeQuantizeLinear) whose every reader is a Conv,
//     ConvTranspose, Gemm or MatMul at its data or weight input is fused into that INT8 layer,
//     which reads the 8-bit codes: the dequantized tensor is never written in 16 bits;
//   - the output of a Conv, ConvTranspose, Gemm or MatMul whose every reader is a QuantizeLinear
//     (or FakeQuantizeLinear) is requantized from the FP32 accumulator in the layer's epilogue.
// Neither applies to a graph output (TensorRT writes it in its type).
#pragma once

#include "ir/graph.h"

namespace quantkit::runtime {

// Conv, ConvTranspose, Gemm, MatMul (default domain).
bool IsInt8Layer(const ir::Node& node);
// `v` (a DequantizeLinear / FakeQuantizeLinear output) is read only by INT8 layers' inputs 0/1.
bool FusedIntoInt8Layers(const ir::Value* v);
// `v` (an INT8 layer's output) is read only by QuantizeLinear / FakeQuantizeLinear input 0.
bool RequantizedInEpilogue(const ir::Value* v);

}  // namespace quantkit::runtime
