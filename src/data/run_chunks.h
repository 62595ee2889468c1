// Fixed execution runs for calibration. ATen's float kernels (oneDNN convolution, BLAS GEMM) pick
// their blocking, and so their summation order, by batch size: a sample's activations differ in
// the last bits with the number of samples in the model run. Calibration therefore never runs the
// caller's batches as they come: it cuts the data, in sample order, into runs of exactly
// `run_batch` samples starting at multiples of run_batch (the last run holds the rest). Which
// samples share a run is then a function of the sample index alone, so the statistics do not
// depend on how the data was read or handed in (--batch-size, DataLoader batches), nor on launch
// sharding (ranks take whole runs); run_batch 1 makes them independent of the order too.
// The one place batches become model runs: the CLI's calibration (analysis::ReadInOrder) and the
// public StatisticsCollector (fed by CollectStatistics(BatchStream) and by Python) go through
// RunChunker.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/source.h"

namespace quantkit::data {

// The run batch calibration uses for a model with these inputs: `requested` (>= 1) when runs can
// be cut and stacked anywhere — every input batched on its leading axis with a fixed-size dtype
// and static per-sample dims — capped at the batch the model fixes; otherwise 1 (state inputs,
// unbatched inputs or varying sample shapes: one sample per run).
int64_t RunBatchFor(const std::vector<InputSpec>& inputs, int64_t requested);

// Re-cuts a stream of batches (any sizes, in sample order) into runs of run_batch samples.
// A run inside one batch is a view of its rows (no copy); a run straddling batches is stacked
// into new memory. Inputs not batched on the leading axis are passed whole to every run (only
// with run_batch 1, by RunBatchFor). Labels follow their rows.
class RunChunker {
 public:
  // chunk_size > 0: the grid of runs restarts at every multiple of chunk_size (diagnose's
  // chunks, each with statistics of its own): no run straddles a chunk, and a chunk's runs do not
  // depend on where the stream started, as long as it started at a chunk boundary.
  RunChunker(int64_t run_batch, std::vector<InputSpec> inputs, int64_t chunk_size = 0);

  // The runs completed by the samples of `batch`, in order.
  std::vector<Batch> Add(const Batch& batch);
  // The samples left over (a shorter run) as one run; nullopt when there are none.
  std::optional<Batch> Finish();

  int64_t run_batch() const { return run_batch_; }

 private:
  struct Piece {
    Batch batch;
    int64_t begin = 0, count = 0;  // rows [begin, begin + count) of batch
  };
  Batch Stack();  // the pending rows as one run; clears them

  int64_t run_batch_, chunk_size_;
  std::vector<InputSpec> inputs_;
  std::vector<Piece> pending_;
  int64_t pending_rows_ = 0;
  int64_t position_ = 0;  // samples added so far
  int64_t target_ = 0;    // size of the run being gathered (run_batch, or less before a chunk end)
};

}  // namespace quantkit::data
