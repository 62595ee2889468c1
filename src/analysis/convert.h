// `quantkit convert IN OUT`: moves quantization parameters between every pair of formats through
// the QuantPlan hub. The kind of IN and OUT is taken from the file extension:
//   .onnx                 a Q/DQ model (IN) or a model to write (OUT)
//   .cache .calib .table  TensorRT calibration cache
//   .json                 quantkit plan JSON (ranges with provenance)
//   .txt .ranges          sampleINT8API dynamic-range text
// Conversions:
//   Q/DQ ONNX -> cache | json | txt       extract (scales propagated through shape ops)
//   Q/DQ ONNX -> ONNX                     strip to the float model, and write <stem>.cache,
//                                         <stem>.plan.json, <stem>.ranges.txt beside it
//   cache | json | txt -> cache | json | txt
//   cache | json | txt + --model FLOAT.onnx -> Q/DQ ONNX (TensorRT placement, weights per channel)
#pragma once

#include <string>
#include <vector>

#include "formats/trt_cache.h"
#include "ir/graph.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

enum class ArtifactKind { kOnnx, kTrtCache, kPlanJson, kRangesText };
Result<ArtifactKind> ArtifactKindFromPath(const std::string& path);

struct ConvertOptions {
  std::string input;
  std::string output;
  std::string model;  // float model for plan -> Q/DQ ONNX
  formats::TrtCacheWriteOptions cache;
  passes::PlacementOptions placement;
  // plan -> Q/DQ ONNX: false = TensorRT's recipe (qdq_placement.h); true = exactly the tensors
  // the plan extracted from a Q/DQ model (reproduces that model's fake quantization).
  bool placement_from_plan = false;
  std::string float_precision = "fp16";  // for the --layerPrecisions string
};

struct ConvertResult {
  std::vector<std::string> written;   // files written, in order
  std::vector<std::string> messages;  // summary lines (counts, warnings)
  std::string layer_precisions;       // trtexec --layerPrecisions value ("" when none)
};

Result<ConvertResult> Convert(const ConvertOptions& options);

// trtexec --layerPrecisions value ("node:precision,..."): the plan's float_nodes plus the
// weighted ops (Conv, ConvTranspose, Gemm, MatMul) none of whose activation inputs the plan
// quantizes. `graph` is the float model (before Q/DQ insertion: inputs keep the plan's names).
std::string LayerPrecisions(const ir::Graph& graph, const quant::QuantPlan& plan,
                            const std::string& precision);

}  // namespace quantkit::analysis
