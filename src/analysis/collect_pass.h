// One streaming pass of a data source through a model, shared by `calibrate` and `diagnose`:
// batches are read from the source, fed to the interpreter and every watched activation is routed
// into a quant::TensorCollector by CollectingObserver. Callers may switch the collector set between
// batches (diagnose keeps one set per chunk of samples) and look at each batch's inputs/outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/run_chunks.h"
#include "data/source.h"
#include "quant/collectors/tensor_collector.h"
#include "quantkit/status.h"
#include "runtime/interpreter.h"
#include "runtime/observer.h"
#include "runtime/tensor_stats.h"

namespace quantkit::analysis {

using CollectorMap = std::map<std::string, quant::TensorCollector>;

// Routes the watched activations of each run into their collectors (views are float, in place).
// Activations on a GPU are summarised there (runtime/tensor_stats.h) and the batch summary is
// merged into the collector, which is exact (partition invariance), so the statistics equal
// those of a CPU run byte for byte.
// The watched names are the keys of the map given at construction; set_target() switches to
// another map with the same keys (a new chunk) without changing what is watched.
class CollectingObserver final : public runtime::Observer {
 public:
  explicit CollectingObserver(CollectorMap* collectors) : collectors_(collectors) {}
  void set_target(CollectorMap* collectors) { collectors_ = collectors; }
  bool Wants(const std::string& name) const override { return collectors_->count(name) != 0; }
  bool WantsFloat() const override { return true; }
  // Q/DQ placement quantizes inside If/Loop/Scan bodies: their tensors are watched by qualified
  // name (ir/scopes.h), every iteration's values included.
  bool WantsSubgraphTensors() const override { return true; }
  Status OnTensor(const std::string& name, const ir::Node* producer,
                  const runtime::TensorView& view) override;
  const runtime::TensorStatsRequest* StatsRequestFor(const std::string& name) const override;
  Status OnStats(const std::string& name, const ir::Node* producer,
                 const runtime::TensorStats& stats) override;

 private:
  CollectorMap* collectors_;
  mutable std::map<std::string, runtime::TensorStatsRequest> requests_;
};

// The collector state of one batch summarised on a device: merged into a collector, it gives
// exactly what Observe() of the same values gives.
Result<quant::TensorCollector> CollectorFromStats(const runtime::TensorStats& stats, int log2_bins);

struct PassOptions {
  int64_t batch_size = 32;
  // > 0: reads are whole multiples of run_batch, aligned to multiples of it, so InRuns cuts
  // them into runs without copying (calibration, data/run_chunks.h). 0: no constraint.
  int64_t run_batch = 0;
  // > 0: no batch straddles a multiple of chunk_size, so per-chunk statistics stay exact.
  int64_t chunk_size = 0;
  std::string label = "calibrate";  // progress-bar label
  bool progress = true;
};

struct PassHooks {
  // Before each run, with the batch's first sample index (switch collectors, inspect inputs).
  std::function<Status(int64_t start, const data::Batch& batch)> before_run;
  // After each run, with the model outputs.
  std::function<Status(int64_t start, const std::vector<runtime::NamedTensor>& outputs)> after_run;
};

// Next batch of a pass, or std::nullopt at the end (a data::Source read in order, or a stream
// such as the public quantkit::BatchStream).
using BatchReader = std::function<Result<std::optional<data::Batch>>()>;

// Batches of `source` in order: batch_size samples each (with run_batch, a multiple of it: rounded
// down, at least run_batch), never straddling a multiple of options.chunk_size when it is set.
BatchReader ReadInOrder(const data::Source& source, const PassOptions& options);

// Samples per model run for collecting statistics on a model with `inputs` (data/run_chunks.h):
// `requested`, or 8 on the CPU (convolutions reach their per-sample speed by then;
// docs/performance.md) and 128 on a GPU (one kernel launch per op per run); 1 where runs cannot
// be stacked. calibrate and diagnose use it.
int64_t CalibrationRunBatch(const std::vector<data::InputSpec>& inputs,
                            std::optional<int64_t> requested);

// The samples ReadInOrder reads at a time from `source`: options.batch_size capped by the model's
// fixed batch, rounded to whole runs. Also the granule of a rank's shard, so that every rank runs
// the model on exactly the runs one process would.
int64_t ReadSize(const data::Source& source, const PassOptions& options);

// ReadInOrder(source, options) cut into runs of options.run_batch (> 0) that restart at every
// options.chunk_size (RunChunker): the one way a data::Source feeds calibration and diagnose.
BatchReader ReadRuns(const data::Source& source, const PassOptions& options,
                     const std::vector<data::InputSpec>& inputs);

// The batches of `next` re-cut into model runs by `chunker` (data/run_chunks.h): the runs depend
// on the sample index only, not on how `next` batches the data.
BatchReader InRuns(BatchReader next, data::RunChunker chunker);

// Runs every batch of `next` through `interpreter` once; returns the number of samples. The
// hooks' `start` is the running sample index. `size_hint` (-1: unknown) sizes the progress bar.
// Errors name the sample range. Fails on a stream without samples.
Result<int64_t> RunBatches(const runtime::Interpreter& interpreter, const BatchReader& next,
                           int64_t size_hint, const PassOptions& options,
                           const std::vector<runtime::Observer*>& observers,
                           const PassHooks& hooks = {});

// Runs every sample of `source` through `interpreter` once. Errors name the sample range.
Status RunPass(const runtime::Interpreter& interpreter, const data::Source& source,
               const PassOptions& options, const std::vector<runtime::Observer*>& observers,
               const PassHooks& hooks = {});

}  // namespace quantkit::analysis
