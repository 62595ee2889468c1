// The one writer of a quantized model's files. Every command that writes a plan's model
// (calibrate and its --compare-methods / --budget / auto paths, the public WriteArtifacts and
// WriteQdqModel, fallback, qat, convert) stages them here, so that the same plan gives the same
// files, named alike, whichever command wrote them:
//
//   model.float.onnx  the float model with the weights the plan's PTQ stages changed (only then);
//                     the plan's provenance names it by its SHA-256
//   model.qdq.onnx    passes::ApplyPlan on the float model (TensorRT placement), or a Q/DQ model a
//                     command built itself (fallback's search result, convert's re-placed model)
//   calib.cache, ranges.txt   the implicit-INT8 files of TensorRT <= 10 (Jetson, DLA), when asked
//   plan.json         the plan as applied (with the weight entries ApplyPlan filled in)
//
// Files go into an ArtifactSet (common/artifact_set.h): nothing is visible until its Commit.
#pragma once

#include <string>

#include "common/artifact_set.h"
#include "formats/trt_cache.h"
#include "ir/graph.h"
#include "passes/apply_plan.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct QuantizedFiles {
  std::string model_name = "model.qdq.onnx";
  bool implicit_int8 = true;  // the cache and the ranges
  bool plan_json = true;
  // convert names them after its output (out.cache, out.plan.json, out.ranges.txt).
  std::string cache_name = "calib.cache", ranges_name = "ranges.txt", plan_name = "plan.json";
  formats::TrtCacheWriteOptions cache;
};

// model.float.onnx when `plan` carries weights a PTQ stage changed (read from `model_path`, the
// overrides applied), its hash into plan->provenance.float_model_sha256. Nothing otherwise.
Status StageFloatModel(const std::string& model_path, quant::QuantPlan* plan, ArtifactSet* set);

// The plan's Q/DQ model: passes::ApplyPlan(plan, apply) on `float_model` (a model loaded for
// quantization; consumed), exported as files.model_name, then StagePlanFiles. `plan` gains the
// weight entries ApplyPlan fills in, as written. Returns ApplyPlan's report.
Result<passes::PassReport> StageQuantizedModel(ir::Model float_model,
                                               const passes::ApplyPlanOptions& apply,
                                               quant::QuantPlan* plan, const QuantizedFiles& files,
                                               ArtifactSet* set);

// The whole set for a plan of the float model file `model_path` (calibrate, the public
// WriteArtifacts): StageFloatModel, then StageQuantizedModel with TensorRT's placement on a clone
// of `loaded`, the caller's model as loaded for quantization from that file (shared and immutable;
// the clone shares its weights copy-on-write, so writing holds no second copy of them: reading
// the file again did, 2.35 GiB more on a ViT-H/14, bench/big_model_memory.py).
Result<passes::PassReport> StagePlanArtifacts(const std::string& model_path,
                                              const ir::Model& loaded,
                                              const passes::PlacementOptions& placement,
                                              passes::WeightStorage weight_storage,
                                              quant::QuantPlan* plan, const QuantizedFiles& files,
                                              ArtifactSet* set);

// A Q/DQ model built elsewhere (fallback, convert), exported as files.model_name, then
// StagePlanFiles.
Status StageBuiltModel(const ir::Model& qdq_model, const quant::QuantPlan& plan,
                       const QuantizedFiles& files, ArtifactSet* set);

// calib.cache and ranges.txt (files.implicit_int8), then plan.json (files.plan_json).
Status StagePlanFiles(const quant::QuantPlan& plan, const QuantizedFiles& files, ArtifactSet* set);

// trtexec --layerPrecisions value ("node:precision,..."): the plan's float_nodes plus the
// weighted ops (Conv, ConvTranspose, Gemm, MatMul) none of whose activation inputs the plan
// quantizes. `graph` is the float model (before Q/DQ insertion: inputs keep the plan's names). What
// convert and fallback report and layer_precisions.txt holds.
std::string LayerPrecisions(const ir::Graph& graph, const quant::QuantPlan& plan,
                            const std::string& precision);

}  // namespace quantkit::pipelines
