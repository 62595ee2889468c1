// The one writer of what quantkit's workflows deploy: every Q/DQ model, calibration cache, ranges
// text and plan JSON in an output set is written here, into a common/artifact_set.h ArtifactSet
// (the directory locked, each file staged, all of them committed or none).
//
//   calibrate, the public WriteArtifacts   model.qdq.onnx (model.float.onnx) calib.cache
//                                          ranges.txt plan.json
//   fallback                               model.qdq.onnx plan.json (+ layer_precisions.txt ...)
//   qat                                    model.qdq.onnx calib.cache plan.json (+ model.float.onnx ...)
//   convert, a Q/DQ model to an ONNX file  OUT.onnx OUT.cache OUT.plan.json OUT.ranges.txt
//   convert plan -> Q/DQ ONNX, WriteQdqModel   the one model file
//
// Workflows add their own reports (summary.txt, fallback.json, training_log.json) to the same set
// with StageText; a plan format is added in formats/plan_files.h and appears everywhere at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/artifact_set.h"
#include "formats/trt_cache.h"
#include "ir/graph.h"
#include "passes/apply_plan.h"
#include "passes/insert_qdq.h"
#include "passes/pass.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// What a writer wrote, and what ApplyPlan inserted for it.
struct ArtifactReport {
  std::vector<std::string> written;
  passes::PassReport inserted;  // ApplyPlan's
};

// The file names of a plan's artifacts in a set; an empty name is not written.
struct PlanArtifactNames {
  std::string qdq_model = "model.qdq.onnx";
  // The float model holding the weights PTQ stages changed (plan.initializers): written only for
  // such a plan, whose provenance then names it by its hash (TensorRT <= 10 builds the cache from
  // it; QAT starts from it).
  std::string float_model = "model.float.onnx";
  std::string cache = "calib.cache";
  std::string ranges = "ranges.txt";
  std::string plan = "plan.json";

  std::vector<std::string> All() const;  // the non-empty names, in this order
  // OUT.onnx and, beside it, OUT.cache, OUT.ranges.txt and OUT.plan.json (convert).
  static PlanArtifactNames BesideModel(const std::string& model_file_name);
};

// Stages `qdq_model` (already holding its Q/DQ; may be null when names.qdq_model is empty) and
// the plan's files into `out`. The set must have been opened with these names.
Status StagePlanArtifacts(ArtifactSet& out, const ir::Model* qdq_model, const quant::QuantPlan& plan,
                          const formats::TrtCacheWriteOptions& cache, const PlanArtifactNames& names = {});

struct CalibrationArtifactOptions {
  passes::PlacementOptions placement;  // TensorRT's recipe under these options
  formats::TrtCacheWriteOptions cache;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;
};

// A calibrated plan's artifacts from the float model at `model_path`: the float model with the
// plan's changed weights (names.float_model, when it has some; its hash stamped into the plan's
// provenance), the Q/DQ model on a fresh copy of the file (the one plan -> Q/DQ code,
// passes::ApplyPlan with TensorRT's placement), and the plan's files, written from `*plan` as
// ApplyPlan completed it (the weight entries it lacked). Returns ApplyPlan's report.
Result<passes::PassReport> StageCalibrationArtifacts(ArtifactSet& out, const std::string& model_path,
                                                     quant::QuantPlan* plan,
                                                     const CalibrationArtifactOptions& options,
                                                     const PlanArtifactNames& names = {});

// A text file of the set (reports, summaries), written atomically into its staging place.
Status StageText(ArtifactSet& out, const std::string& name, const std::string& text);

// A Q/DQ model alone at `path` (convert's plan -> ONNX): a set of one file in its directory.
// Returns the path written.
Result<std::string> WriteQdqModelFile(const std::string& path, const ir::Model& qdq_model);

// The Q/DQ model of `plan` on a fresh copy of the float model at `model_path`, alone at `path`
// (the public WriteQdqModel). Q/DQ go where `apply` puts them: TensorRT's recipe for a calibrated
// plan, the source model's sites for a plan read from a Q/DQ model (kAuto).
Result<ArtifactReport> WriteQdqModel(const std::string& model_path, const quant::QuantPlan& plan,
                                     const passes::ApplyPlanOptions& apply, const std::string& path);

}  // namespace quantkit::pipelines
