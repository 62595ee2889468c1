// The per-layer input cache of the PTQ stages (pipelines/ptq/stages.h): for each weighted layer,
// in topological order, the activation it reads in the FP32 model and in the simulation of the
// plan as it is at that moment (the quantized prefix: every layer before it already carries what
// the stage chose), from the same samples.
//
// Both models run forward segment by segment: between two layers only the nodes in between run,
// on the values live at the previous cut (kept per run batch, in memory). So one sweep over the
// layers costs one run of each model over the samples, not one per layer. The simulation model is
// rebuilt from (float model, plan) at each step (analysis::BuildSimulationModel: the very model
// eval and the exported Q/DQ file compute), so a stage's change to the layers before is seen by
// the layers after.
//
// Memory: the values live at a cut for every cached sample, twice (FP32 and simulation), plus the
// layer's own inputs: bounded by the caller's choice of samples (pipelines/ptq/stages.h sizes them
// from the FP32 model's peak live bytes per sample). Deterministic: no randomness, batches in
// order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/simulate.h"
#include "data/source.h"
#include "ir/graph.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

// One weighted layer a stage can optimise, with the block whose output it reconstructs: the
// layer and the elementwise activations that only it feeds (BatchNormalization, Relu, Clip,
// Sigmoid, ...), up to the next tensor a Q/DQ site reads.
struct PtqLayer {
  std::string node;        // the node's name (reports; may be empty in the file)
  std::string op_type;     // Conv, ConvTranspose, Gemm, MatMul
  std::string output;      // its first output: identifies it in the float and simulation models
  std::string data_input;  // the activation it reads
  size_t data_input_index = 0;
  std::string weight;        // the float initializer (the plan's weight entry)
  std::string block_output;  // the last output of the block
  int64_t output_channel_dim =
      1;  // of block_output: 1 for Conv/ConvTranspose, -1 (last) for Gemm/MatMul
};

struct SkippedLayer {
  std::string node, reason;
};

// The main graph's weighted nodes whose weight entry the plan quantizes, in topological order.
// Layers a stage cannot optimise are listed in `skipped` with the reason (a weight shared by two
// nodes, a weight that is not an initializer, a node kept in float, a second non-constant input).
Result<std::vector<PtqLayer>> FindPtqLayers(const ir::Model& float_model,
                                            const quant::QuantPlan& plan,
                                            const std::vector<passes::QdqSite>& sites,
                                            std::vector<SkippedLayer>* skipped);

// The model computing `wanted` from `given` (values of `model` that become its graph inputs, under
// the same names) and its constants: every node the outputs do not need is removed, and so are
// unused inputs and initializers. Inputs of `model` that are read stay inputs.
Result<ir::Model> ExtractSubModel(const ir::Model& model, const std::vector<std::string>& given,
                                  const std::vector<std::string>& wanted);

// The block of `layer` as a model: one input (layer.data_input), one output (layer.block_output).
Result<ir::Model> ExtractLayerBlock(const ir::Model& float_model, const PtqLayer& layer);

class LayerInputCache {
 public:
  // `batches`: the samples, run batch by run batch (every model input in each).
  static Result<std::unique_ptr<LayerInputCache>> Create(
      std::shared_ptr<const ir::Model> float_model, std::vector<data::Batch> batches,
      const SimulationOptions& simulation);

  struct LayerInputs {
    std::vector<ir::Tensor> fp32;       // per run batch: the layer's input in the FP32 model
    std::vector<ir::Tensor> quantized;  // the same in the simulation of the plan (quantized prefix)
  };
  // Runs both models on to just before `layer`. Layers come in FindPtqLayers' order, each once.
  Result<LayerInputs> Advance(const PtqLayer& layer, const quant::QuantPlan& plan);

  size_t num_batches() const { return num_batches_; }
  int64_t num_samples() const { return num_samples_; }
  // Bytes of the cached values now, and the most they held.
  int64_t bytes() const;
  int64_t peak_bytes() const { return peak_bytes_; }

 private:
  using Store = std::map<std::string, std::vector<ir::Tensor>>;  // value -> per run batch
  struct Side {
    Store store;
    int64_t position = 0;  // nodes of the topological order already run
  };
  // Runs `model`'s nodes from side->position up to `position` on the stored values.
  Status RunSegment(const ir::Model& model, int64_t position, Side* side) const;

  std::shared_ptr<const ir::Model> float_model_;
  SimulationOptions simulation_;
  Side fp32_, quantized_;
  size_t num_batches_ = 0;
  int64_t num_samples_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace quantkit::analysis
