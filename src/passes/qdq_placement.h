// Where TensorRT explicit quantization wants Q/DQ pairs (calibration-spec §5), decided once and
// shared by calibration (which tensors need statistics) and InsertQdq (where to put the pairs).
//
// Rules (TensorRT's "inputs and weights" recipe, as ModelOpt implements it):
//   R1  weighted ops (Conv, ConvTranspose, Gemm, MatMul): quantize the activation inputs per tensor
//       and constant weights per channel (axis: Conv 0, ConvTranspose 1, Gemm 0 if transB else 1,
//       MatMul 1 for a 2-D weight, rank-2 for higher ranks); biases stay float.
//   R2  AveragePool / GlobalAveragePool inputs are quantized (they run in INT8 after a conv).
//   R3  residual Add: only the skip branch is quantized, so TensorRT fuses Conv + Add. The
//       "backbone" input is the one produced by a Conv (through BatchNormalization / Relu / Clip
//       is NOT followed: the fused epilogue is Conv -> Add). When both come from Convs (a
//       projection shortcut), the backbone is the DEEPER Conv (longest path from the graph
//       inputs: the main branch has two or three Convs where the shortcut has one), ties broken
//       by topological order; the shortcut Conv's output is quantized (TensorRT's ResNet recipe).
//       An Add fed by no Conv stays float.
//   R4  LayerNormalization, Softmax and every other op stay float (no Q/DQ) unless the user
//       adds the op type.
//   R5  excluded nodes (by name) and op types are skipped entirely.
//   R6  the bodies of If, Loop and Scan get the same rules: a site's consumer may sit in a body,
//       and its tensor is the qualified name of ir/scopes.h ("/If.then_branch::x"; a capture is
//       named where it is defined, so a body's Conv on a main-graph weight has that weight's name).
// A site is one (consumer node, input index); tensors with several sites share one Q/DQ pair
// per graph (a body reading a captured tensor gets its own pair, inside the body).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::passes {

struct PlacementOptions {
  std::set<std::string> weighted_op_types{"Conv", "ConvTranspose", "Gemm", "MatMul"};
  std::set<std::string> pool_op_types{"AveragePool", "GlobalAveragePool"};
  bool quantize_residual_add = true;
  bool per_channel_weights = true;
  std::set<std::string> exclude_nodes;     // node names kept in float
  std::set<std::string> exclude_op_types;  // op types kept in float

  // --exclude NAME: a node name or an op type. Both sets get it: exporters' node names
  // (/layer1/Conv) never look like op types, and a name matching neither is an error
  // (CheckExclusions). quantkit::Placement::Exclude is the same rule in the public API.
  void Exclude(const std::string& name) {
    exclude_nodes.insert(name);
    exclude_op_types.insert(name);
  }
};

struct QdqSite {
  ir::Node* consumer = nullptr;
  int input_index = 0;
  std::string tensor;  // the plan key: the value's name, qualified in bodies (R6)
  quant::TensorRole role = quant::TensorRole::kActivation;
  int64_t axis = -1;  // per-channel axis for weights; -1 per tensor
};

// Sites in topological order of their consumers. Fails on a cyclic graph and on exclusions that
// match nothing (passes/placement_rules.h CheckExclusions).
Result<std::vector<QdqSite>> FindQdqSites(const ir::Graph& graph, const PlacementOptions& options);

// Sites that put Q/DQ exactly where the plan's entries came from a Q/DQ model (source "qdq:"),
// at every consumer of each such tensor: re-inserting an extracted plan this way reproduces the
// original model's fake quantization. Entries that were propagated or calibrated are skipped,
// except one propagated through a float Cast whose Cast output is not in `graph` (an FP16
// model's scale applied to the FP32 model it came from: passes/extract_qdq.h).
std::vector<QdqSite> SitesFromPlan(const ir::Graph& graph, const quant::QuantPlan& plan);

// Names of the activation tensors that need statistics (deduplicated, sorted).
std::vector<std::string> ActivationTensors(const std::vector<QdqSite>& sites);

}  // namespace quantkit::passes
