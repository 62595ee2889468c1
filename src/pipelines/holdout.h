// Held-out data taken from the calibration data itself, for the workflows that judge plans
// against FP32 when the user has no separate held-out set (calibrate --budget, --method auto,
// --compare-methods without --holdout).
#pragma once

#include <cstdint>

#include "analysis/plan_eval.h"
#include "pipelines/calibrate.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// One sample in four is held out: enough to see a collapse against FP32, few enough to keep the
// ranges of the calibration part.
inline constexpr int64_t kHoldoutShareDivisor = 4;

// Splits calibrate->data (within calibrate->samples): the last quarter (at least one sample, at
// most max_holdout_samples when > 0) becomes eval's data (eval->data, first_sample, samples), and
// calibrate->samples is set to the head, so no plan is judged on the samples it was calibrated on.
// kInvalidArgument, naming the data, when it holds fewer than 2 samples.
Status HoldOutCalibrationTail(CalibrateOptions* calibrate, analysis::PlanEvalOptions* eval,
                              int64_t max_holdout_samples);

}  // namespace quantkit::pipelines
