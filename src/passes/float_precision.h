// Rewrites  a float32 model with its Q/DQ  ->  the same model typed for a strongly typed TensorRT
// build (TensorRT 11; TensorRT 10 with --stronglyTyped), whose ONNX types decide every layer's
// precision: the float part in FP16 (or BF16), INT8 where quantized, FP32 only where needed.
//
//   a node computes in FP32 when  it is pinned (FloatPrecision::fp32_nodes), reads or writes a
//       tensor of FloatPrecision::fp32_tensors (the statistics say the dtype cannot hold it), reads
//       an initializer the dtype cannot hold (its largest |value| rounds to inf or to 0), reads a
//       DequantizeLinear whose scale the dtype cannot hold within half an INT8 step (|s' - s| >
//       s/254), has no FP16 version in ONNX (kNoLowPrecisionOps), sets its output dtype by an
//       attribute other than Cast's, is in a custom domain, has outputs of unknown type, or holds a
//       body (If/Loop/Scan: the bodies stay FP32); every other node computes in the dtype;
//   DequantizeLinear  takes the dtype of its consumers (a copy per dtype when they disagree), so no
//       Cast ever separates a DQ from the op TensorRT fuses it into; its scale is rounded to that
//       dtype (nearest even), zero points stay int8;
//   QuantizeLinear    takes the dtype of its DequantizeLinear (the pair shares its scale), with a
//       Cast before it where its producer differs (a region boundary);
//   Cast              one per (tensor, dtype) where a producer and a consumer differ; graph inputs
//       and outputs keep the model's float32 (one Cast after an input, one before an output, the
//       output's name kept) unless FloatPrecision::cast_io;
//   opset             below 19 the model is upgraded first (passes/upgrade_opset.h).
// Only the main graph is converted (bodies and the tensors they capture stay FP32). With dtype
// kFloat32 the pass does nothing. Like ApplyPlan, whose last step it is, it rewrites a float32
// model once and is not meant to run twice on its own output. Requires every quantized constant's
// scale as an initializer (ApplyPlan's output, or any model loaded for quantization).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// Calibrated ranges are measured on finite data: a tensor stays FP32 when its amax comes within
// this factor of the dtype's largest value (FP16: amax > 65504 / 16 = 4094), so that inputs 16x
// beyond anything the calibration data produced still do not overflow.
inline constexpr float kFloat16RangeMargin = 16.0f;

// The largest relative change of a Q/DQ scale rounded to the float dtype: half an INT8 step at
// amax (127 steps), i.e. the largest quantized value moves by at most half a step.
inline constexpr float kMaxScaleRounding = 1.0f / 254.0f;

ir::DType ToIrDType(quant::FloatDType dtype);

// Why a tensor whose calibrated |values| reach `amax` cannot be stored in `dtype` ("" when it
// can): amax beyond the dtype's largest value / kFloat16RangeMargin, or a nonzero amax below the
// dtype's smallest normal (every value subnormal or flushed). What BuildPlan records in
// FloatPrecision::fp32_tensors.
std::string FloatRangeProblem(float amax, quant::FloatDType dtype);

// Activation entries of `plan` whose calibrated amax plan->float_precision.dtype cannot hold
// (FloatRangeProblem), added to float_precision.fp32_tensors with "(the plan's range)": the FP32
// islands of a plan read without statistics (a TensorRT cache holds a range for every tensor it
// names). Returns how many it added; none for FP32.
int64_t MarkPlanRangeFp32Tensors(quant::QuantPlan* plan);

// The float dtype a writer uses when the user names none, and that of a plan read from a file that
// records none (TensorRT cache, ranges text: analysis::ReadPlanFile): FP16, what a TensorRT 11
// engine should run outside the INT8 layers (docs/strongly-typed.md). The simulation computes
// such a model as TensorRT does (runtime/float_precision.h), so every accuracy quantkit reports
// is that of the FP16 + INT8 model it writes.
inline constexpr quant::FloatDType kDefaultFloatDType = quant::FloatDType::kFloat16;

// What a user asks of the float part (the CLI's --float-dtype, --cast-io, --keep-fp32).
struct FloatOptions {
  quant::FloatDType dtype = kDefaultFloatDType;
  bool cast_io = false;
  std::vector<std::string> keep_fp32;  // node names or op types computed in FP32
};

// The plan's FloatPrecision for `graph` (the float model): dtype, cast_io, and keep_fp32 resolved
// to node names (an op type pins each node of that type), each with its reason. A name matching no
// node name or op type is kNotFound, with the closest names. fp32_tensors is left as it was.
Status ResolveFloatOptions(const ir::Graph& graph, const FloatOptions& options,
                           quant::FloatPrecision* precision);

// Counts "casts_inserted" and "fp32_nodes"; lists "fp32_nodes" ("node (Op): reason").
class ConvertFloatPrecision final : public Pass {
 public:
  explicit ConvertFloatPrecision(const quant::FloatPrecision& precision) : precision_(precision) {}
  const char* Name() const override { return "convert_float_precision"; }
  Status Run(ir::Model& model, PassReport* report) const override;

 private:
  quant::FloatPrecision precision_;
};

}  // namespace quantkit::passes
