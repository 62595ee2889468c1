#pragma once
// training.svg of `quantkit qat`: the loss per step and the validation metric per evaluation,
// so the curve of a run can be looked at without a plotting library.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace quantkit::pipelines {

struct TrainingCurve {
  std::vector<std::pair<int64_t, double>> loss;  // (step, training loss)
  std::vector<std::pair<int64_t, double>> val;   // (step, metric); step 0 = the PTQ start
  std::string title;                             // e.g. the model and the loss
  std::string metric;                            // the validation metric's name
  // A share in [0, 1] (top1, agreement: a 0-100% axis), else an error on an axis of its own
  // range (rel_mse).
  bool val_is_share = true;
  int64_t best_step = -1;  // marked on the val curve (the kept parameters)
};

// A self-contained SVG document (no script, no external references). Empty curves give an
// empty plot with its axes, never an error.
std::string TrainingSvg(const TrainingCurve& curve);

}  // namespace quantkit::pipelines
