// QuantPlan: the hub every input format becomes and every output is produced from
// (docs/architecture.md, decision 4).
//
// Per tensor (keyed by ONNX value name) it says whether the tensor is quantized and why not,
// the quantized dtype, the scale(s) and zero-point(s), the per-channel axis, and where the numbers
// came from. Scale is the primary number: it is what a Q/DQ node or a TensorRT cache stores, so
// cache -> plan -> cache and Q/DQ -> plan -> Q/DQ are bit-exact. amax is kept beside it as the
// calibrated clipping threshold (for range files and reports):
//
//     symmetric int8:  scale = float32(amax) / 127.0f,  zero_point = 0,  q = clamp(rne(x/scale),
//     -128, 127)
//
// A plan never holds a zero, negative, infinite or NaN scale for a quantized tensor
// (ValidatePlan checks it; degenerate calibrations are marked not-quantized with a reason).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::quant {

enum class QuantDType { kInt8, kUint8 };

// The dtype of a written model's non-quantized tensors (strongly typed TensorRT: the ONNX types
// decide each layer's precision; docs/strongly-typed.md).
enum class FloatDType { kFloat32, kFloat16, kBFloat16 };

enum class TensorRole {
  kActivation,  // produced at run time (includes graph inputs)
  kWeight,      // constant input of a weighted op (per-channel by default)
};

const char* QuantDTypeName(QuantDType dtype);
const char* TensorRoleName(TensorRole role);
Result<QuantDType> ParseQuantDType(const std::string& s);
Result<TensorRole> ParseTensorRole(const std::string& s);
const char* FloatDTypeName(FloatDType dtype);  // "fp32", "fp16", "bf16"
// "fp32" | "fp16" | "bf16" (also "float32", "float16", "bfloat16"): the CLI's --float-dtype.
Result<FloatDType> ParseFloatDType(const std::string& s);

struct TensorQuant {
  std::string tensor;
  bool quantized = true;
  std::string reason;  // why it is not quantized, or a diagnostic worth reporting
  TensorRole role = TensorRole::kActivation;
  QuantDType dtype = QuantDType::kInt8;
  std::vector<float> scale;         // 1 element: per tensor; N: per channel along axis
  std::vector<float> amax;          // same length as scale (derived as scale*127 if unknown)
  std::vector<int32_t> zero_point;  // same length as scale; all 0 for symmetric int8
  int64_t axis = -1;                // per-channel axis; -1 for per tensor
  std::string source;               // "max", "entropy", "percentile:99.99", "qdq:<node>", "cache"

  bool per_channel() const { return scale.size() > 1 || axis >= 0; }
};

// Where the numbers came from, written into every output that can carry it.
struct Provenance {
  std::string model_sha256;
  std::string data_description;
  std::string data_sha256;
  std::string method;
  std::string quantkit_version;
  int64_t num_samples = 0;
  // The PTQ stages that edited this plan after the range choice (pipelines/ptq/stages.h), in the
  // order they ran, each with its parameters: "adaround(iterations=2000, reg=0.01, ...)".
  std::vector<std::string> stages;
  // When a stage changed weights: the SHA-256 of the float model holding them (calibrate's
  // model.float.onnx). A plan file with it applies to that model, not to model_sha256's.
  std::string float_model_sha256;
};

// A float initializer whose values a PTQ stage replaced (AdaRound's rounding, SeqMSE's clip
// grid, bias correction's bias): passes::ApplyPlan writes `value` into the model before it places
// Q/DQ, so the Q/DQ model, the simulation, the float model written for the cache and QAT's start
// point all compute with it. Same dtype (float32) and dims as the initializer it replaces.
struct InitializerOverride {
  ir::Tensor value;
  std::string stage;  // the stage that wrote it ("adaround")
};

// How a writer types the float (non-quantized) part of the model: every float tensor in `dtype`,
// except the FP32 islands named here, each with its reason. Decided once, recorded in the plan, so
// that every writer of the plan (calibrate, convert, fallback, qat) writes the same model.
struct FloatPrecision {
  FloatDType dtype = FloatDType::kFloat32;
  // Graph inputs and outputs take `dtype` too (default: they keep the model's own types, with a
  // Cast after each float input and before each float output).
  bool cast_io = false;
  // Nodes, and op types, computed in FP32 by request (--keep-fp32 NAME|OPTYPE), with the reason.
  std::map<std::string, std::string> fp32_nodes;
  std::map<std::string, std::string> fp32_op_types;
  // Tensors `dtype` cannot hold, from the calibration statistics (range beyond it with the margin
  // of passes/float_precision.h, or values it flushes): their producers and consumers stay FP32.
  std::map<std::string, std::string> fp32_tensors;

  bool operator==(const FloatPrecision& o) const {
    return dtype == o.dtype && cast_io == o.cast_io && fp32_nodes == o.fp32_nodes &&
           fp32_op_types == o.fp32_op_types && fp32_tensors == o.fp32_tensors;
  }
};

struct QuantPlan {
  Provenance provenance;
  std::map<std::string, TensorQuant> tensors;  // sorted: deterministic outputs
  // Nodes kept in higher precision (mixed-precision fallback), with the reason for each.
  std::map<std::string, std::string> float_nodes;
  // Initializers replaced by PTQ stages, by (qualified) initializer name. Kept in memory and in
  // the float model calibrate writes beside the plan (model.float.onnx); plan.json records only
  // provenance.float_model_sha256, so a plan file is paired with that model.
  std::map<std::string, InitializerOverride> initializers;
  // The float dtype of the written model and its FP32 islands.
  FloatPrecision float_precision;

  const TensorQuant* Find(const std::string& tensor) const;
  // Adds or replaces a per-tensor symmetric int8 entry from a calibrated amax.
  // A non-finite or non-positive amax yields quantized = false with a reason (never a bad scale).
  TensorQuant& SetActivationAmax(const std::string& tensor, float amax, const std::string& source);
  // Adds or replaces a symmetric int8 entry from a stored scale (Q/DQ model, cache).
  TensorQuant& SetScale(const std::string& tensor, std::vector<float> scale, int64_t axis,
                        TensorRole role, const std::string& source);
  size_t NumQuantized() const;
};

// float32(amax) / 127.0f — the TensorRT scale of a symmetric int8 range (calibration-spec §1.1).
float ScaleFromAmax(float amax);
// scale * 127 computed in double, rounded to float32.
float AmaxFromScale(float scale);

// Checks every quantized entry: scales finite and > 0, amax/zero_point sizes match, zero points
// in range, axis >= 0 when per channel. Messages name the tensor.
Status ValidatePlan(const QuantPlan& plan);

}  // namespace quantkit::quant
