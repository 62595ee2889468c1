// The statistics pass over batches a caller pushes one at a time (the public
// StatisticsCollector: Python's numpy arrays, a DataLoader, a BatchStream), beside the pull pass
// of calibration_steps.h that `quantkit calibrate` runs. Both cut the data into the same model
// runs (data/run_chunks.h: --run-batch samples, cut at multiples of it in sample order), so the
// statistics of a data set do not depend on how the caller batches it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/source.h"
#include "passes/qdq_placement.h"
#include "pipelines/calibration_steps.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct PushCollectionOptions {
  int64_t run_batch = 0;         // samples per model run; 0: calibration's default for the model
  int64_t expected_samples = 0;  // sizes the progress bar (0: unknown)
  bool progress = false;
};

class PushCollection {
 public:
  // Collectors on the activations `placement` quantizes in `model`.
  static Result<std::unique_ptr<PushCollection>> Create(const LoadedModel& model,
                                                        const passes::PlacementOptions& placement,
                                                        const PushCollectionOptions& options);
  ~PushCollection();

  // The model's inputs: batches must conform to them (data::ConformBatch) before Observe.
  const std::vector<data::InputSpec>& inputs() const;
  int64_t samples() const;    // observed so far
  int64_t batches() const;    // Observe() calls that succeeded
  int64_t run_batch() const;  // samples per model run

  // Whether a batch (a source) may be observed now: the pass is open, and a source is read whole,
  // never mixed with pushed batches. Observe and ObserveSource check it too; callers that convert
  // their data first call it before, so that the pass's own errors come first.
  Status CanObserve() const;
  Status CanObserveSource() const;
  // One conformed batch (errors name `origin`): its bytes join the data's SHA-256, and the model
  // runs on the runs it completes; samples held back keep their arrays alive until they run.
  Status Observe(data::Batch batch, const std::string& origin);
  // Every sample of `source`, read in batches of `batch_size` and run as `quantkit calibrate
  // --data` runs them; its description and fingerprint become the statistics'. A source is read
  // whole: not mixed with Observe() in one pass.
  Status ObserveSource(const data::Source& source, int64_t batch_size);
  // Runs the samples still held back and closes the pass (once; fails without samples). Pushed
  // batches are described as "<description> (<N> samples in <B> batches)" with the fingerprint
  // "sha256:<hex>" of their bytes.
  Result<Statistics> Finish(const std::string& description);
  // The same, with the data named as given (a stream that describes itself).
  Result<Statistics> Finish(const std::string& description, const std::string& fingerprint);

 private:
  struct Impl;
  explicit PushCollection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace quantkit::pipelines
