// How the interpreter computes float16 and bfloat16 tensors (runtime-internal: includes ATen).
//
// TensorRT runs a strongly typed FP16 (or BF16) network with 16-bit storage of its float tensors
// and FP32 arithmetic inside the kernels (convolution and GEMM accumulate in FP32; pointwise,
// normalisation and reduction kernels compute in FP32 and write 16-bit results). The interpreter
// computes the same values on any device:
//
//   1. a float16 / bfloat16 input of a node is widened to float32 (exact) before the kernel runs,
//      so every kernel computes in FP32 (ATen's CPU kernels mostly lack Half: "round_vml_cpu not
//      implemented for 'Half'" was the first failure on a ModelOpt FP16 model);
//   2. a float32 result whose ONNX type is 16-bit is rounded to that type (nearest even) at the
//      tensor boundary, and kept in float32 storage holding the rounded values (the "logical"
//      type of the slot says float16): the next kernel reads it without widening again. Graph
//      outputs (and If/Loop/Scan body outputs) are handed out in their 16-bit type.
//   The ONNX type of a result is found as ONNX types it: Cast `to`, CastLike's second input,
//   DequantizeLinear's scale, a `dtype` attribute; otherwise the type of the node's first float
//   input (T of the op's signature). A node with no 16-bit float input and no 16-bit result is
//   untouched, so FP32 models compute bit for bit as before.
//   3. QuantizeLinear with a float16 input and scale divides, rounds half to even and saturates
//      in FP32 (the input and the scale widened exactly): TensorRT's Quantize layer takes its
//      scale in the input's type (TensorRT operator reference, "Quantize": "scale: tensor of
//      type T1", T1 float16/bfloat16/float32) and quantizes as round(x / scale) with ties to even
//      (IQuantizeLayer); its kernels compute in FP32. DequantizeLinear forms (q - z) * scale in
//      FP32 and rounds once to the scale's type.
//
// Where TensorRT fuses, an ONNX tensor never exists in 16 bits, and rounding it would add an
// error TensorRT does not make; the two fusions of runtime/trt_fusions.h are followed (a
// DequantizeLinear read only by INT8 layers, an INT8 layer's output read only by QuantizeLinear:
// both stay in FP32). The rest of TensorRT's fusions keep tensors at their ONNX types here, a
// documented approximation (docs/strongly-typed.md).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace quantkit::runtime {

// How a node's float results are typed and stored (decided once, when the plan is built).
struct StepPrecision {
  enum class Role : uint8_t {
    kCompute,      // widen 16-bit inputs, round float32 results with a 16-bit type
    kExact,        // data movement / selection: widen inputs; results are already representable
    kPassThrough,  // control flow (If, Loop, Scan), Shape, Size: inputs and results untouched
  };
  // Where the ONNX type of float results comes from.
  enum class TypeFrom : uint8_t {
    kFirstFloatInput,  // T of the signature: the first input of a floating type
    kInput,            // the input `type_input` (CastLike: 1, DequantizeLinear: the scale)
    kKernel,  // an attribute (Cast `to`, `dtype`, `output_dtype`): the kernel's own result type
  };
  Role role = Role::kCompute;
  TypeFrom type_from = TypeFrom::kFirstFloatInput;
  int type_input = 0;
  // Only results [0, typed_outputs) take the 16-bit type (LayerNormalization's Mean and
  // InvStdDev are float32 whatever X is).
  int typed_outputs = 1 << 30;
  // Per output: keep the exact FP32 values (a TensorRT fusion; see above).
  std::vector<bool> keep_fp32;
  // kFirstFloatInput: the inputs in the order they are tried, non-constant ones first.
  std::vector<int> type_order;
};

StepPrecision PlanStepPrecision(const ir::Node& node);

// at::kHalf / at::kBFloat16; false for every other type.
inline bool Is16BitFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// The 16-bit type a value stands for: `logical` when set (float32 storage of rounded values),
// else its storage type when that is 16-bit, else at::ScalarType::Undefined.
inline at::ScalarType Logical16(const at::Tensor& t, at::ScalarType logical) {
  if (logical != at::ScalarType::Undefined) return logical;
  return t.defined() && Is16BitFloat(t.scalar_type()) ? t.scalar_type() : at::ScalarType::Undefined;
}

// Widens the 16-bit inputs of a kCompute / kExact step to float32 in place and returns the 16-bit
// type its float results take (Undefined: none). `logical[i]` is the logical type of input i.
at::ScalarType PrepareInputs(const StepPrecision& p, std::vector<at::Tensor>& inputs,
                             const std::vector<at::ScalarType>& logical);

// Rounds float32 result `j` to `type16` when the step's rules say so (in place when the tensor is
// the only reference to its buffer) and returns the logical type to record for its slot.
at::ScalarType FinishOutput(const StepPrecision& p, size_t j, at::ScalarType type16,
                            at::Tensor& out);

// `t` (float32 storage of logical type `logical`) in its 16-bit storage type, for graph and body
// outputs; `t` itself when `logical` is Undefined.
at::Tensor Materialize(const at::Tensor& t, at::ScalarType logical);

}  // namespace quantkit::runtime
