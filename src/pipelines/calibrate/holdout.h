// Held-out data taken from the calibration data itself, for the workflows that judge plans
// against FP32 when the user has no separate held-out set (calibrate --budget, --method auto,
// --compare-methods without --holdout).
#pragma once

#include <cstdint>
#include <string>

#include "analysis/plan_eval.h"
#include "pipelines/calibrate/calibrate.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// One sample in kHoldoutShareDivisor (pipelines/calibration_steps.h) is held out.

// What calibrate->data holds, opened against the model's inputs as the calibration opens it.
struct CalibrationDataSize {
  int64_t samples = 0;
  std::string description;
};
Result<CalibrationDataSize> MeasureCalibrationData(const CalibrateOptions& calibrate);

// Splits calibrate->data (within calibrate->samples): the last quarter (at least one sample, at
// most max_holdout_samples when > 0) becomes eval's data (eval->data, first_sample, samples), and
// calibrate->samples is set to the head, so no plan is judged on the samples it was calibrated on.
// kInvalidArgument, naming the data, when it holds fewer than 2 samples.
Status HoldOutCalibrationTail(CalibrateOptions* calibrate, analysis::PlanEvalOptions* eval,
                              int64_t max_holdout_samples);
// The same split of data already measured.
Status HoldOutTail(const CalibrationDataSize& size, int64_t max_holdout_samples,
                   CalibrateOptions* calibrate, analysis::PlanEvalOptions* eval);

}  // namespace quantkit::pipelines
