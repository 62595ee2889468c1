#include "pipelines/calibrate/holdout.h"

#include <algorithm>
#include <memory>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "data/source.h"

namespace quantkit::pipelines {

Result<CalibrationDataSize> MeasureCalibrationData(const CalibrateOptions& calibrate) {
  std::shared_ptr<const ir::Model> model;
  if (calibrate.loaded_model) {
    model = calibrate.loaded_model->model;  // loaded once already (the repair ladder)
  } else {
    QK_ASSIGN_OR_RETURN(ir::Model loaded, analysis::LoadModelForQuantization(calibrate.model));
    model = std::make_shared<const ir::Model>(std::move(loaded));
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(calibrate.data, data::ModelInputs(*model), calibrate.image));
  return CalibrationDataSize{source->num_samples(), source->Describe()};
}

Status HoldOutCalibrationTail(CalibrateOptions* calibrate, analysis::PlanEvalOptions* eval,
                              int64_t max_holdout_samples) {
  QK_RETURN_IF_NOT(
      calibrate->from_stats.empty(), StatusCode::kInvalidArgument,
      "holding out part of the calibration data needs the data itself, not --from-stats; give "
      "--holdout SPEC");
  QK_ASSIGN_OR_RETURN(CalibrationDataSize size, MeasureCalibrationData(*calibrate));
  return HoldOutTail(size, max_holdout_samples, calibrate, eval);
}

Status HoldOutTail(const CalibrationDataSize& size, int64_t max_holdout_samples,
                   CalibrateOptions* calibrate, analysis::PlanEvalOptions* eval) {
  int64_t total = size.samples;
  if (calibrate->samples > 0) total = std::min(total, calibrate->samples);
  QK_RETURN_IF_NOT(
      total >= 2, StatusCode::kInvalidArgument,
      "{}: holding out part of the calibration data needs at least 2 samples, it has {}; give "
      "more data or --holdout SPEC",
      size.description, total);
  int64_t held = std::max<int64_t>(1, total / kHoldoutShareDivisor);
  if (max_holdout_samples > 0) held = std::min(held, max_holdout_samples);
  calibrate->samples = total - held;
  eval->data = calibrate->data;
  eval->image = calibrate->image;
  eval->first_sample = calibrate->samples;
  eval->samples = held;
  return Status::Ok();
}

}  // namespace quantkit::pipelines
