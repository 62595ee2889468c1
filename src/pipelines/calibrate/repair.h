// `quantkit calibrate` by default (--repair auto): the plan as asked is judged against FP32 on
// held-out samples, and when it misses the check's target (pipelines/calibrate/check.h: 97%
// argmax agreement on a class output, else 1e-2 output relative MSE) calibrate repairs it with
// the tools quantkit has, cheapest first, each candidate judged on the same held-out samples:
//
//   rung  name                          the candidate
//   0     as asked                      --method (default max) and --ptq as given
//   1     auto                          the best method on the held-out samples, refined per
//                                       tensor (pipelines/calibrate/auto_method.h): plans over the
//                                       same statistics, no model run
//   2     smoothquant,bias-correction   the label-free PTQ stages on the best plan so far (one
//                                       pass over --ptq-samples calibration samples); skipped
//                                       when --ptq was given (its stages ran at every rung)
//   3     seqmse                        SeqMSE added to the best plan's stages (slower)
//   4     fallback                      the fewest layers kept in the float dtype that bring the
//                                       best plan within the target (pipelines/evaluate/fallback.h)
//
// The ladder stops at the first rung that meets the target and otherwise writes the best rung
// (meeting the target first, then the check's figure, then rel MSE); the summary lists every
// rung with its figure and seconds, the one kept, and when the target was missed the next
// command. Nothing is written before the choice: one artifact set, or none.
//
// Time cap (--repair-time S; default kRepairTimeFactor x the time to rung 0's verdict, at least
// kRepairMinSeconds): rungs 1-3 start only within the first half of the cap, which leaves the
// fallback the rest; the fallback search stops at the cap with the best set it has. Results are
// deterministic unless the cap cuts the ladder short (the summary says so).
//
// Held-out samples (the same for the ladder and the check), in order:
//   1. --holdout SPEC: its first N samples; the calibration uses all of --data;
//   2. --data holds samples beyond --samples M: the N that follow them;
//   3. fashion-mnist data: fashion-mnist:val, N samples (the zoo's own validation split);
//   4. --data has at least kRepairMinSplitSamples: its last N (at most a quarter), which the
//      calibration leaves out;
//   5. fewer: no ladder (a repair chosen on calibrated samples would be verified by nothing): the
//      plain calibration on all of them, its check in-sample, and a note saying so.
// N is the check's size (CheckSampleCount). Statistics are always collected with histograms, so
// that rung 1 reuses them (entropy's pass costs 1.04-1.3x max's, docs/performance.md).
//
// Under a launch (torchrun) every rank collects its shard as calibrate does; rank 0 runs the
// ladder on the merged statistics (the other ranks wait for its outcome; the cap is then at most
// half of --dist-timeout), so a launch writes the bytes one process writes.
//
// The ladder does not run (the plain calibration and its check instead, with a note) from
// statistics alone, without an INT8 part (--int8 off), without -o, or with the check off.
#pragma once

#include "pipelines/calibrate/calibrate.h"
#include "quantkit/calibration.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

using quantkit::kMaxRepairSeconds;
using quantkit::kRepairMinSeconds;
using quantkit::kRepairTimeFactor;
// Below it there is nothing to hold out (a quarter would be under 4 samples).
inline constexpr int64_t kRepairMinSplitSamples = kCheckMinSamples;

struct RepairOptions {
  bool enabled = true;          // --repair auto; false: --repair off, today's plain calibration
  double time_cap_seconds = 0;  // 0: automatic
};

// The cap in range (checked before anything is read).
Status CheckRepairOptions(const RepairOptions& repair);

Result<CalibrateResult> CalibrateRepaired(const CalibrateOptions& options,
                                          const RepairOptions& repair);

}  // namespace quantkit::pipelines
