#include "pipelines/calibration_run.h"

#include <algorithm>

#include "common/check.h"
#include "pipelines/calibrate_budget.h"
#include "pipelines/compare_methods.h"
#include "quant/method.h"

namespace quantkit::pipelines {

namespace {

std::string WroteLines(const std::vector<std::string>& files) {
  std::string s;
  for (const std::string& f : files) s += "wrote " + f + "\n";
  return s;
}

Result<CalibrationRun> WithinBudget(const CalibrationRequest& request) {
  CalibrateBudgetOptions b;
  b.calibrate = request.calibrate;
  b.budget = *request.budget;
  b.holdout = request.holdout;
  b.holdout_samples = request.holdout_samples;
  b.metric = request.metric;
  QK_ASSIGN_OR_RETURN(CalibrateBudgetResult r, CalibrateWithinBudget(b));
  CalibrationRun run;
  run.text = FormatCalibrateBudget(r);
  // The report names the repaired files; the calibration's others are listed after it.
  const std::vector<std::string>& repaired = r.fallback.written;
  for (const std::string& f : r.calibration.written) {
    if (std::find(repaired.begin(), repaired.end(), f) == repaired.end())
      run.text += "wrote " + f + "\n";
  }
  run.written = r.calibration.written;
  for (const std::string& f : repaired) {
    if (std::find(run.written.begin(), run.written.end(), f) == run.written.end())
      run.written.push_back(f);
  }
  run.within_budget = r.fallback.search.within_budget;
  run.repaired_plan = std::move(r.fallback.plan);
  run.rank = r.calibration.rank;
  run.result = std::move(r.calibration);
  return run;
}

Result<CalibrationRun> Compare(const CalibrationRequest& request, bool per_tensor) {
  CompareMethodsOptions cm;
  cm.calibrate = request.calibrate;
  cm.holdout = request.holdout;
  // The zoo's own split is the default holdout for its data.
  if (cm.holdout.empty() && cm.calibrate.data.rfind("fashion-mnist", 0) == 0)
    cm.holdout = "fashion-mnist:val";
  cm.holdout_samples = request.holdout_samples;
  cm.metric = request.metric;
  cm.per_tensor = per_tensor;  // auto refines per tensor; --compare-methods is the per-model table
  QK_ASSIGN_OR_RETURN(CompareMethodsResult r, CompareMethods(cm));
  CalibrationRun run;
  run.json = CompareMethodsJson(r) + "\n";
  run.text = FormatCompareMethods(r) + r.best_result.summary + WroteLines(r.best_result.written);
  run.written = r.best_result.written;
  run.rank = r.best_result.rank;
  run.result = std::move(r.best_result);
  return run;
}

}  // namespace

Status AddMethodOverride(const std::string& spec,
                         std::map<std::string, quant::MethodRequest>* overrides) {
  const size_t eq = spec.rfind('=');
  QK_RETURN_IF_NOT(eq != std::string::npos && eq != 0, StatusCode::kInvalidArgument,
                   "--override '{}' is not NAME=METHOD", spec);
  QK_ASSIGN_OR_RETURN((*overrides)[spec.substr(0, eq)], quant::ParseMethod(spec.substr(eq + 1)));
  return Status::Ok();
}

Result<CalibrationRun> RunCalibration(CalibrationRequest request) {
  CalibrateOptions& c = request.calibrate;
  // auto is a choice among the methods, made by --compare-methods' evaluation.
  const bool auto_method = request.method == "auto";
  QK_ASSIGN_OR_RETURN(c.method, quant::ParseMethod(auto_method ? "max" : request.method));
  for (const std::string& o : request.overrides)
    QK_RETURN_IF_ERROR(AddMethodOverride(o, &c.method_overrides));
  if (request.budget) {
    QK_RETURN_IF_NOT(
        !request.compare_methods && !auto_method, StatusCode::kInvalidArgument,
        "--budget repairs one method's plan: give --method max|entropy|percentile|mse, "
        "not --compare-methods or --method auto");
    return WithinBudget(request);
  }
  if (request.compare_methods || auto_method) return Compare(request, auto_method);
  CalibrationRun run;
  QK_ASSIGN_OR_RETURN(run.result, Calibrate(c));
  run.text = run.result.summary + WroteLines(run.result.written);
  run.written = run.result.written;
  run.rank = run.result.rank;
  return run;
}

}  // namespace quantkit::pipelines
