// INT8 simulation of a QuantPlan on the float model, exactly as TensorRT's explicit mode computes
// it: symmetric int8, round half to even, saturation to [-128, 127], per-channel weights, bias in
// float.
//
// Why a Q/DQ model and not a hook on tensors: the placement (passes/qdq_placement.h) quantizes a
// tensor only on the edges into quantized consumers (a residual Add's backbone input, a Softmax or
// a float-kept node read the float tensor). Building the very Q/DQ graph that `calibrate` exports
// (passes/apply_plan.h) and running it makes "simulation == exported Q/DQ ONNX in onnxruntime"
// true by construction; the only difference is that weight Q/DQ pairs are folded into
// fake-quantized initializers once at setup (same float values, computed with quant/params.h),
// so a run pays only for activation fake quantization, and each activation pair runs as one
// com.quantkit::FakeQuantizeLinear (passes/fuse_activation_qdq.h: the same bits in one pass).
#pragma once

#include <string>

#include "ir/graph.h"
#include "passes/apply_plan.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

// Simulation places Q/DQ exactly as every exported model does: passes::ApplyPlan.
using PlacementMode = passes::PlacementPolicy;
using SimulationOptions = passes::ApplyPlanOptions;

// Reads a plan from any format the hub knows, by extension: plan .json, TensorRT cache
// (.cache/.calib/.table), ranges text (.txt/.ranges), or a Q/DQ .onnx (e.g. a QAT export: its
// scales are extracted, and kAuto placement then puts Q/DQ back exactly where that model had them).
// Its float precision (what the simulation and every writer type the float part in): a plan.json's
// own; passes::kDefaultFloatDType for a cache or ranges file (FP32 islands from its ranges:
// passes::MarkPlanRangeFp32Tensors); a Q/DQ model's own scale dtype.
Result<quant::QuantPlan> ReadPlanFile(const std::string& path);

// Plan entries (quantized) that name no tensor of the graph: a plan for another model, or a model
// renamed since. Fails when none of the plan's quantized activations is in the graph.
Result<std::vector<std::string>> UnmatchedPlanTensors(const ir::Graph& graph,
                                                      const quant::QuantPlan& plan,
                                                      const std::string& model_name);

// A plan file whose PTQ stages changed weights (provenance.float_model_sha256; the weights are not
// in the file) applies to the float model written beside it (model.float.onnx), not to the
// original: kInvalidArgument naming both when `model_path` is another file. Ok for every other
// plan, and for a plan holding its weights in memory (plan.initializers).
Status CheckPlanFloatModel(const quant::QuantPlan& plan, const std::string& model_path);

// Load + passes::ApplyPlan + passes::FoldWeightQdq + passes::FuseActivationQdq: the model a
// simulation runs.
Result<ir::Model> BuildSimulationModel(const std::string& float_model_path,
                                       const quant::QuantPlan& plan,
                                       const SimulationOptions& options);

// The same on a clone (ir/clone.h) of a model already loaded by LoadModelForQuantization, which
// is left untouched: a search evaluating many plans reads and prepares the file once.
Result<ir::Model> BuildSimulationModel(const ir::Model& float_model, const quant::QuantPlan& plan,
                                       const SimulationOptions& options);

}  // namespace quantkit::analysis
