// What calibrate's repair ladder (pipelines/calibrate/repair.h) did: each rung with its held-out
// figure and time, the one kept and why, and when the target was missed, the next command.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace quantkit::pipelines {

struct RepairRung {
  std::string name;  // "as asked", "auto", "smoothquant,bias-correction", "seqmse", "fallback"
  std::string
      detail;  // the candidate: "max", "entropy, 2 tensor(s) changed", "1 layer(s) in float: conv2"
  std::string skipped;     // non-empty: not tried, and why
  bool passes = false;     // meets the check's target
  double agreement = NAN;  // argmax agreement with FP32 (class outputs)
  double rel_mse = NAN;    // output relative MSE vs FP32
  double seconds = 0;
};

struct RepairReport {
  bool ran = false;
  std::string not_run;     // why no ladder ran although --repair auto (statistics only, a launch)
  std::string target;      // "top-1 agreement >= 97%" or "output rel MSE <= 0.01"
  std::string holdout;     // the samples every rung is judged on, with their origin
  double cap_seconds = 0;  // --repair-time, or the automatic cap
  double seconds = 0;      // the whole ladder, rung 0 included
  std::vector<RepairRung> rungs;  // in the order tried (or skipped)
  int kept = -1;                  // index into rungs of the plan written
  bool met = false;               // the plan written meets the target
  std::string next;               // target missed: the next thing to run
};

// The summary's "repair: ..." lines ("" when the ladder did not run and has nothing to say).
std::string FormatRepair(const RepairReport& r);

}  // namespace quantkit::pipelines
