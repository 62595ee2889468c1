// The accuracy check every `quantkit calibrate` ends with: the plan as written (INT8 where
// quantized, the float dtype elsewhere: the same passes::ApplyPlan the written model comes from,
// simulated by analysis/plan_eval.h) against the FP32 model on samples the calibration did not
// see, so that a default that ruins a model says so in its summary instead of silently.
//
// Where the samples come from, in order:
//   1. --holdout SPEC: its first N samples (held out by the user);
//   2. the data holds samples beyond those calibrated on (--samples M of a larger --data): the N
//      samples that follow them, [M, M + N) (held out, disjoint from the calibration);
//   3. the calibration used all of the data: its last N samples, labelled "in-sample" (the
//      calibration saw them; a collapse still shows, an overfit range does not).
// N (CheckSampleCount): --check-samples, or one sample in kCheckShareDivisor of those calibrated
// on, within [kCheckMinSamples, kCheckMaxSamples]: one FP32 run plus one simulated run of N
// samples, about 10% of the calibration pass on the zoo (docs/accuracy.md has the measurements).
//
// The figures: the default metric rule of analyze and --budget (analysis::DefaultMetricName): on
// a class vector, argmax agreement with FP32 (and top-1 with labels); always the output's
// relative MSE against FP32. Above the thresholds the check warns and names the fixes (--method
// auto, --budget, quantkit analyze); the exit code stays 0 (a warning, as every calibrate warning).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "analysis/plan_eval.h"
#include "quant/plan.h"
#include "quantkit/calibration.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// Check size: automatic (-1), none (0) or a count.
// The automatic size, public (quantkit/calibration.h) so that callers can describe it.
using quantkit::kAutoCheckSamples;
using quantkit::kCheckMaxSamples;
using quantkit::kCheckMinSamples;
using quantkit::kCheckShareDivisor;
// Thresholds (docs/accuracy.md): every zoo model under every method stays above 97% argmax
// agreement and below 1e-2 output relative MSE (the worst zoo figures are ~98.4% and ~3e-3); an
// outlier-blown range or a collapsed method falls far beyond both.
inline constexpr double kCheckMinAgreement = 0.97;
inline constexpr double kCheckMaxRelMse = 1e-2;

struct CheckOptions {
  int64_t samples = kAutoCheckSamples;  // 0: no check
  std::string holdout;                  // data spec held out by the user; empty: from --data
  int64_t holdout_samples = 0;          // its first N (0: the check's size)
};

struct CheckResult {
  bool ran = false;
  std::string skipped;     // why there is no check when one was asked (statistics only, ...)
  std::string data;        // the evaluator's description of the samples
  std::string origin;      // "held-out (--holdout)", "held-out", "in-sample"
  bool in_sample = false;  // the calibration saw these samples
  int64_t samples = 0;
  int64_t first_sample = 0;  // of the data spec (origins 2 and 3)
  bool class_output = false;
  double agreement = NAN;              // argmax agreement with FP32 (class outputs)
  double top1 = NAN, fp32_top1 = NAN;  // with labels
  double rel_mse = 0, sqnr_db = 0;     // first output vs FP32
  bool fp32_non_finite =
      false;           // FP32's own output holds NaN/Inf: bad data, nothing to judge against
  double seconds = 0;  // the check's FP32 and simulated runs
  double calibration_seconds = 0;  // the calibration it judges (collection and plan), for scale
  std::string warning;             // non-empty beyond the thresholds
};

// The check's sample count for `calibrated` samples: `requested` when >= 0, else the automatic
// size.
int64_t CheckSampleCount(int64_t requested, int64_t calibrated);

// What the check of a calibration reads: `model` and `data` as calibrated (`image` its
// preprocessing), `calibrated` samples of the `data_total` the data holds. Fills result->origin,
// in_sample and first_sample; `eval` gets data, first_sample and samples.
struct CheckedCalibration {
  std::string model, data;
  int64_t calibrated = 0, data_total = 0;
};
Status ChooseCheckData(const CheckOptions& options, const CheckedCalibration& source,
                       analysis::PlanEvalOptions* eval, CheckResult* result);

// Judges `plan` on `evaluator`'s samples (its simulation options: those of the written model) and
// fills the figures and the warning; `plan_path` (the plan.json written, or empty) goes into the
// warning's `quantkit analyze` hint. The evaluator's FP32 run is counted in the check's time only
// when it was made for the check (`own_evaluator`): an evaluator shared with --method auto or
// --budget had made it already.
Status JudgePlan(const analysis::PlanEvaluator& evaluator, const quant::QuantPlan& plan,
                 const std::string& plan_path, bool own_evaluator, CheckResult* result);

// The summary line ("check: ...") and, beyond the thresholds, the "warning: check: ..." line.
std::string FormatCheck(const CheckResult& r);

}  // namespace quantkit::pipelines
