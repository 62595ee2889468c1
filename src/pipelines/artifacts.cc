#include "pipelines/artifacts.h"

#include "analysis/model_loading.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "formats/plan_files.h"
#include "onnx/export.h"

namespace quantkit::pipelines {

std::vector<std::string> PlanArtifactNames::All() const {
  std::vector<std::string> names;
  for (const std::string* n : {&qdq_model, &float_model, &cache, &ranges, &plan}) {
    if (!n->empty()) names.push_back(*n);
  }
  return names;
}

PlanArtifactNames PlanArtifactNames::BesideModel(const std::string& model_file_name) {
  const size_t dot = model_file_name.rfind('.');
  const std::string stem =
      dot == std::string::npos || dot == 0 ? model_file_name : model_file_name.substr(0, dot);
  return {model_file_name, "", stem + ".cache", stem + ".ranges.txt", stem + ".plan.json"};
}

Status StagePlanArtifacts(ArtifactSet& out, const ir::Model* qdq_model, const quant::QuantPlan& plan,
                          const formats::TrtCacheWriteOptions& cache, const PlanArtifactNames& names) {
  if (!names.qdq_model.empty()) {
    QK_RETURN_IF_NOT(qdq_model != nullptr, StatusCode::kInternal, "no Q/DQ model to write as {}",
                     names.qdq_model);
    QK_RETURN_IF_ERROR(onnx_io::ExportModel(*qdq_model, out.Stage(names.qdq_model)));
  }
  const std::pair<const std::string*, formats::ArtifactKind> files[] = {
      {&names.cache, formats::ArtifactKind::kTrtCache},
      {&names.ranges, formats::ArtifactKind::kRangesText},
      {&names.plan, formats::ArtifactKind::kPlanJson}};
  for (const auto& [name, kind] : files) {
    if (!name->empty()) {
      QK_RETURN_IF_ERROR(formats::WritePlanFile(out.Stage(*name), kind, plan, cache));
    }
  }
  return Status::Ok();
}

Result<passes::PassReport> StageCalibrationArtifacts(ArtifactSet& out, const std::string& model_path,
                                                     quant::QuantPlan* plan,
                                                     const CalibrationArtifactOptions& options,
                                                     const PlanArtifactNames& names) {
  // Weights a PTQ stage changed: the float model holding them, named by its hash in the plan.
  if (!names.float_model.empty() && !plan->initializers.empty()) {
    QK_ASSIGN_OR_RETURN(ir::Model float_model, analysis::LoadModelForQuantization(model_path));
    QK_RETURN_IF_ERROR(passes::ApplyInitializerOverrides(*plan, &float_model));
    const std::string staged = out.Stage(names.float_model);
    QK_RETURN_IF_ERROR(onnx_io::ExportModel(float_model, staged));
    QK_ASSIGN_OR_RETURN(plan->provenance.float_model_sha256, Sha256OfFile(staged));
  }
  // Collected models are shared and immutable: the Q/DQ model is a fresh copy of the file.
  QK_ASSIGN_OR_RETURN(ir::Model qdq_model, analysis::LoadModelForQuantization(model_path));
  passes::ApplyPlanOptions apply;
  apply.placement = options.placement;
  apply.mode = passes::PlacementPolicy::kTensorRT;
  apply.weight_storage = options.weight_storage;
  QK_ASSIGN_OR_RETURN(passes::PassReport inserted, passes::RunPass(qdq_model, passes::ApplyPlan(plan, apply)));
  QK_RETURN_IF_ERROR(StagePlanArtifacts(out, &qdq_model, *plan, options.cache, names));
  return inserted;
}

Status StageText(ArtifactSet& out, const std::string& name, const std::string& text) {
  return WriteFileAtomic(out.Stage(name), text);
}

Result<std::string> WriteQdqModelFile(const std::string& path, const ir::Model& qdq_model) {
  PlanArtifactNames names;
  names.qdq_model = BaseName(path);
  names.float_model = names.cache = names.ranges = names.plan = "";
  QK_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactSet> out, ArtifactSet::Open(DirName(path), names.All()));
  QK_RETURN_IF_ERROR(StagePlanArtifacts(*out, &qdq_model, quant::QuantPlan{}, {}, names));
  QK_RETURN_IF_ERROR(out->Commit().status());
  return path;
}

Result<ArtifactReport> WriteQdqModel(const std::string& model_path, const quant::QuantPlan& plan,
                                     const passes::ApplyPlanOptions& apply, const std::string& path) {
  // The loaded model is shared and immutable: the Q/DQ model is a fresh copy of the file, and the
  // plan a copy that gains the weight scales it lacked.
  QK_ASSIGN_OR_RETURN(ir::Model qdq_model, analysis::LoadModelForQuantization(model_path));
  quant::QuantPlan applied = plan;
  ArtifactReport report;
  QK_ASSIGN_OR_RETURN(report.inserted, passes::RunPass(qdq_model, passes::ApplyPlan(&applied, apply)));
  QK_ASSIGN_OR_RETURN(std::string written, WriteQdqModelFile(path, qdq_model));
  report.written.push_back(written);
  return report;
}

}  // namespace quantkit::pipelines
