// Evaluates QuantPlans (and Q/DQ models) against the FP32 model on one data set, many times:
// the base of `eval --plan`, `calibrate --compare-methods`, `analyze` and `fallback`.
//
// The data is read once and kept in memory, the FP32 model runs once and its first output is
// cached, so each trial costs exactly one run of the simulated model over the samples (no FP32
// re-run, no data decoding). Trials run the Q/DQ model of analysis/simulate.h.
//
// Distributed (analyze and fallback under torchrun; docs/distributed.md): with a communicator
// each rank keeps and runs only its shard of the batches (data/shard.h, on batch boundaries).
// Every trial keeps its numbers per batch (ErrorStats, Metric::State()) and every rank adds all
// ranks' batches in batch order, which a single process does too: every rank gets the values of
// one process bit for bit, so a search takes the same decisions on every rank. Every call that
// runs a model is a collective: all ranks make it, in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/simulate.h"
#include "data/image_options.h"
#include "data/shard.h"
#include "data/source.h"
#include "distributed/communicator.h"
#include "ir/graph.h"
#include "quant/plan.h"
#include "quantkit/status.h"
#include "runtime/observer.h"

namespace quantkit::analysis {

class PrefixCache;  // analysis/prefix_cache.h

struct PlanEvalOptions {
  std::string model;         // the FP32 model
  std::string data;          // data::OpenSource spec
  data::ImageOptions image;  // the preprocessing declared for an image-folder spec
  int64_t first_sample =
      0;  // skip the data's first N samples (the held-out tail of calibration data)
  int64_t samples = 0;
  int64_t batch_size = 64;
  SimulationOptions simulation;
  distributed::Communicator* comm = nullptr;  // not owned; nullptr: one process
  // `model` as LoadModelForQuantization loaded it already (shared, immutable): used instead of
  // reading the file again, so a calibration and its check hold one copy of the weights.
  std::shared_ptr<const ir::Model> loaded;
};

struct TrialResult {
  std::map<std::string, double> metrics;  // by Metric::name()
  ErrorStats output;                      // first output vs FP32
  double seconds = 0;
};

class PlanEvaluator {
 public:
  // Per-batch observer for trials that watch activations (nullptr: none).
  using ObserverFor = std::function<runtime::Observer*(size_t batch_index)>;

  static Result<std::unique_ptr<PlanEvaluator>> Create(const PlanEvalOptions& options);

  // The FP32 model itself (its metrics: top-1 with labels; agreement is 1 by definition).
  Result<TrialResult> EvaluateFp32(const std::vector<Metric*>& metrics) const;
  // With a `cache` (and no observer, which wants every tensor) the trial runs only the part of
  // its model that differs from the cache's base, from cached activations: same results.
  Result<TrialResult> EvaluatePlan(const quant::QuantPlan& plan,
                                   const std::vector<Metric*>& metrics,
                                   const ObserverFor& observer = nullptr,
                                   const PrefixCache* cache = nullptr) const;
  // Any model with the FP32 model's inputs (e.g. a Q/DQ model as written).
  Result<TrialResult> EvaluateModel(ir::Model model, const std::vector<Metric*>& metrics,
                                    const ObserverFor& observer = nullptr,
                                    const PrefixCache* cache = nullptr) const;
  // Runs the FP32 model again over the cached batches with an observer (to capture activations).
  Status RunFp32(const ObserverFor& observer) const;

  // Per-batch numbers a caller computed on this rank's batches (`stride` per batch, batch order)
  // with every rank's, in batch order: the rows one process would hold. A collective.
  Result<std::vector<double>> GatherBatchRows(std::vector<double> local, size_t stride,
                                              const std::string& what) const;
  // One outcome for all ranks (distributed::Communicator::Agree); the status itself in one process.
  Status Agree(const Status& local, const std::string& step) const;

  const PlanEvalOptions& options() const { return options_; }
  const ir::Model& float_model() const { return *float_model_; }
  bool has_labels() const { return has_labels_; }
  // The first output is a class vector: [batch, classes] with more than one class.
  bool class_output() const;
  int64_t num_samples() const { return num_samples_; }      // all ranks together
  size_t num_batches() const { return batches_.size(); }    // this rank's
  const data::ShardRange& shard() const { return shard_; }  // this rank's samples
  int rank() const { return options_.comm ? options_.comm->rank() : 0; }
  int world_size() const { return options_.comm ? options_.comm->world_size() : 1; }
  const std::string& data_description() const { return data_description_; }
  double fp32_seconds() const { return fp32_seconds_; }  // one FP32 pass (excludes data loading)

 private:
  PlanEvalOptions options_;
  std::shared_ptr<const ir::Model> float_model_;
  std::vector<data::Batch> batches_;
  std::vector<ir::Tensor> reference_;  // FP32 first output per batch
  // Per-batch trial numbers (ErrorStats, then each metric's state), combined over batches.
  Result<TrialResult> CombineTrial(const Status& local, std::vector<double> rows,
                                   const std::vector<Metric*>& metrics) const;
  Status CheckMetrics(const std::vector<Metric*>& metrics) const;

  int64_t num_samples_ = 0;
  data::ShardRange shard_;
  bool has_labels_ = false, class_output_ = false;
  std::string data_description_;
  double fp32_seconds_ = 0;
};

}  // namespace quantkit::analysis
