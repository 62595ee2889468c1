// One streaming statistics pass fed batch by batch from Python (a DataLoader, an onnxruntime
// CalibrationDataReader) or from a CLI data spec: the same collectors, placement and model run as
// `quantkit calibrate`, so the statistics, and the plan built from them, are those of the CLI on
// the same data (byte-identical calib.cache), whatever the batching: Python batches are re-cut
// into the CLI's runs (data/run_chunks.h), so a DataLoader of any batch size gives the CLI's
// statistics.
//
// Observe() is called with the GIL held (it reads the arrays) and releases it for the model run;
// Python pulls the next batch only between runs.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipelines/calibrate.h"
#include "analysis/collect_pass.h"
#include "common/progress.h"
#include "common/sha256.h"
#include "data/run_chunks.h"
#include "data/source.h"
#include "passes/qdq_placement.h"
#include "runtime/interpreter.h"

namespace quantkit::python {

class StatsCollector {
 public:
  // Loads `model`, finds the activations TensorRT will quantize under `placement` and prepares
  // one collector each. `expected_samples` (0: unknown) sizes the progress bar.
  // `run_batch`: samples per model run (pipelines::CalibrationRunBatch; unset: the CLI's default).
  StatsCollector(const std::string& model, const passes::PlacementOptions& placement,
                 int64_t expected_samples, bool progress, std::optional<int64_t> run_batch = std::nullopt);

  // One {input: array} batch (arrays viewed, not copied, where the layout allows).
  void Observe(const pybind11::dict& batch);
  // Every sample of a CLI data spec (data/source.h), read and run with the GIL released.
  void ObserveSource(const std::string& spec, const data::ImageOptions& image, int64_t samples,
                     int64_t batch_size);
  // Runs the samples still held back (fewer than a run), then returns the statistics;
  // `description` says where the Python data came from.
  pipelines::Statistics Finish(const std::string& description);

  // Data pointers of the tensors a batch becomes (tests: proves the arrays are not copied).
  std::vector<std::pair<std::string, uintptr_t>> ConformedPointers(const pybind11::dict& batch) const;

  int64_t samples() const { return samples_; }
  const std::vector<std::string>& input_names() const;

 private:
  void CheckOpen() const;
  data::Batch Conform(const pybind11::dict& batch, const std::string& origin) const;
  // Runs the model on each run (GIL released by the caller); errors name the run's samples.
  Status RunAll(std::vector<data::Batch> runs);

  std::vector<data::InputSpec> inputs_;
  std::vector<std::string> input_names_;
  std::unique_ptr<runtime::Interpreter> interpreter_;
  formats::StatsFile stats_;
  std::unique_ptr<analysis::CollectingObserver> observer_;
  std::unique_ptr<data::RunChunker> chunker_;  // Python batches -> model runs (data/run_chunks.h)
  int64_t run_samples_ = 0;                    // samples run so far (error messages)
  std::unique_ptr<Progress> progress_;
  Sha256 data_hash_;      // over every byte fed from Python, in order
  std::string source_description_, source_fingerprint_;  // ObserveSource's
  int64_t samples_ = 0, batches_ = 0;
  bool finished_ = false;
};

}  // namespace quantkit::python
