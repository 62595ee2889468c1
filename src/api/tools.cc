// include/quantkit/tools.h over the pipelines and analysis functions behind `quantkit inspect |
// lint | tensor-calib | cache | data`: options converted, one call, the result converted back.
#include "quantkit/tools.h"

#include "analysis/qdq_lint.h"
#include "api/internal.h"
#include "common/check.h"
#include "pipelines/cache_tools.h"
#include "pipelines/data_dump.h"
#include "pipelines/inspect.h"
#include "pipelines/tensor_calib.h"
#include "quant/method.h"

namespace quantkit {
namespace {

CacheToolReport ToReport(pipelines::CacheToolRun run) {
  return CacheToolReport{run.problems, std::move(run.text)};
}

}  // namespace

Result<ModelInspection> InspectModel(const std::string& path) {
  QK_ASSIGN_OR_RETURN(pipelines::ModelInspection r, pipelines::InspectModel(path));
  return ModelInspection{std::move(r.text), std::move(r.json)};
}

Result<LintReport> LintModel(const std::string& path) {
  QK_ASSIGN_OR_RETURN(analysis::LintReport r, analysis::LintModelFile(path));
  LintReport report;
  report.errors = r.Count(analysis::Severity::kError);
  report.warnings = r.Count(analysis::Severity::kWarning);
  report.notes = r.Count(analysis::Severity::kInfo);
  report.text = analysis::FormatLintText(r);
  report.json = analysis::FormatLintJson(r);
  return report;
}

Result<TensorCalibReport> TensorCalib(const TensorCalibOptions& options) {
  QK_ASSIGN_OR_RETURN(pipelines::TensorCalibRun run,
                      pipelines::TensorCalib({options.file, options.methods, options.bins}));
  TensorCalibReport report;
  for (const quant::MethodAmax& m : run.report.results)
    report.methods.push_back({quant::MethodLabel(m.request), m.amax});
  report.text = std::move(run.text);
  report.json = std::move(run.json);
  return report;
}

Result<CacheToolReport> InspectCache(const std::string& path, bool json) {
  QK_ASSIGN_OR_RETURN(pipelines::CacheToolRun run, pipelines::InspectCacheFile(path, json));
  return ToReport(std::move(run));
}

Result<CacheToolReport> DiffCaches(const std::string& a, const std::string& b, double rtol) {
  QK_ASSIGN_OR_RETURN(pipelines::CacheToolRun run, pipelines::DiffCacheFiles(a, b, rtol));
  return ToReport(std::move(run));
}

Result<CacheToolReport> CheckCache(const std::string& path, const std::string& model,
                                   const std::string& trt_version, const std::string& calibrator) {
  QK_ASSIGN_OR_RETURN(pipelines::CacheToolRun run,
                      pipelines::CheckCacheFile(path, model, trt_version, calibrator));
  return ToReport(std::move(run));
}

Result<DumpDataReport> DumpData(const DumpDataOptions& options) {
  pipelines::DataDumpRequest r;
  r.model = options.model;
  r.data = options.data;
  QK_ASSIGN_OR_RETURN(r.image, api::ToImageOptions(options.image));
  r.samples = options.samples;
  r.output_dir = options.output_dir;
  QK_ASSIGN_OR_RETURN(std::string line, pipelines::DumpData(r));
  return DumpDataReport{line + "\n"};
}

}  // namespace quantkit
