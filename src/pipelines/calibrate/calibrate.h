// `quantkit calibrate`: one streaming pass of real data through the FP32 model, statistics for
// every activation TensorRT will quantize (passes/qdq_placement.h), a QuantPlan from the chosen
// method, and TensorRT's artifacts written atomically into the output directory:
//
//   model.qdq.onnx   Q/DQ model for explicit quantization (TensorRT >= 8; the primary output)
//   calib.cache      implicit-calibration cache  TRT-<version>-<calibrator>  (TensorRT <= 10, DLA)
//   ranges.txt       sampleINT8API dynamic ranges  <tensor>:<amax>
//   plan.json        the QuantPlan with provenance (every scale, source and exclusion reason)
//   summary.txt      what was quantized, excluded and why; warnings; the accuracy check
//
// Every calibration that writes ends with an accuracy check of the plan as written against FP32
// on held-out samples (pipelines/calibrate/check.h): a line in the summary, a warning beyond
// its thresholds.
//
// Memory stays flat in the number of samples: collectors keep O(bins) per tensor, never the
// activations. --stats writes the statistics (.qkstats); --from-stats skips the model run and
// merges shards, giving exactly the plan one pass over all their data would give.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/image_options.h"
#include "distributed/launch.h"
#include "formats/qkstats.h"
#include "formats/trt_cache.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_placement.h"
#include "pipelines/calibrate/check.h"
#include "pipelines/calibrate/repair_report.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/ptq/stages.h"
#include "quant/plan.h"
#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit {
class ArtifactSet;
}

namespace quantkit::pipelines {

// A plan built (and staged) already, written as it is: --method auto's pick, the repair ladder's.
// `ptq` the report of its stages, `warnings` those of its BuildPlan.
struct ReadyPlan {
  quant::QuantPlan plan;
  PtqReport ptq;
  std::vector<std::string> warnings;
  // Judged already on options.check_evaluator (the repair ladder): the check is not run again.
  std::optional<CheckResult> check;
  // The fallback's --layerPrecisions value (plan.float_nodes), written as layer_precisions.txt.
  std::string layer_precisions;
};

struct PreparedCalibration;

struct CalibrateOptions {
  std::string model;
  std::string data;          // data::OpenSource spec; empty with from_stats
  data::ImageOptions image;  // preprocessing declared for an image-folder --data
  int64_t samples = 0;       // 0: all the data holds
  int64_t batch_size = 32;
  // Samples per model run (data/run_chunks.h): runs cut at multiples of it in sample order, so
  // the statistics do not depend on batch_size or the launch size; 1 also makes them independent
  // of the order. Unset: the device's default (analysis::CalibrationRunBatch). Models whose runs
  // cannot be stacked (state inputs, varying sample shapes) run one sample at a time
  // (data::RunBatchFor).
  std::optional<int64_t> run_batch;
  quant::MethodRequest method;  // default: max
  // Per-tensor overrides by tensor name or by the op type of the tensor's consumer.
  std::map<std::string, quant::MethodRequest> method_overrides;
  passes::PlacementOptions placement;
  // The float part of the written model: --float-dtype, --cast-io, --keep-fp32 (the statistics
  // then also hold the range of every float tensor, which decides where FP16 cannot hold one).
  passes::FloatOptions floats;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;  // --weight-storage
  // false (--int8 off): no Q/DQ at all, the float-dtype conversion alone from the same statistics
  // (what ModelOpt's AutoCast does, in bounded memory): writes model.<dtype>.onnx, plan.json and
  // summary.txt.
  bool int8 = true;
  std::string output_dir;  // empty: compute the plan only
  std::string stats_out;   // write .qkstats
  std::vector<std::string> from_stats;
  formats::TrtCacheWriteOptions cache;
  bool progress = true;  // bar on a terminal (quiet when piped regardless)
  // Statistics already collected (Python's quantkit.Statistics): no model run. Not owned.
  const Statistics* statistics = nullptr;
  // When set (on rank 0), the artifacts are staged into this set, opened on output_dir with
  // CalibrationArtifactNames among its names, and the caller commits it together with its own
  // files (calibrate --budget: one set or nothing). Not owned.
  ArtifactSet* artifacts = nullptr;
  // Under torchrun/srun/a PyTorchJob each rank collects its shard, rank 0 merges exactly and
  // writes everything (analysis/distributed.h); other ranks write nothing.
  distributed::DistributedOptions distributed;
  // PTQ stages after the range choice (--ptq; pipelines/ptq/stages.h). With a stage that changes
  // weights, the artifacts include model.float.onnx (the float model the cache applies to).
  PtqOptions ptq;
  // The accuracy check (pipelines/calibrate/check.h); samples 0: none. Runs when a plan is
  // written (output_dir or artifacts) or returned, on rank 0, after the plan is built. A check
  // that cannot run (statistics only, a bad --holdout) is a warning, never a lost calibration.
  CheckOptions check;
  // Judge the plan on this evaluator's samples instead (--method auto: the held-out data the
  // choice was made on, FP32 outputs cached already), labelled `check_origin`. Not owned.
  const analysis::PlanEvaluator* check_evaluator = nullptr;
  std::string check_origin;
  // `model` loaded already (LoadFloatModel; the repair ladder loads it once for its evaluator and
  // the calibration): used instead of reading the file again. Not owned.
  const LoadedModel* loaded_model = nullptr;
  // The repair ladder's report (pipelines/calibrate/repair.h), for the summary; and its notes
  // (why it did not run, how the held-out samples were taken).
  const RepairReport* repair = nullptr;
  std::vector<std::string> notes;
  // On rank 0 once the statistics are merged: the plan to write instead of options.method's (the
  // repair ladder, pipelines/calibrate/repair.h). Its statistics are then collected with
  // histograms, whatever the method.
  std::function<Result<ReadyPlan>(const PreparedCalibration&)> choose_plan;
};

struct CalibrateResult {
  quant::QuantPlan plan;
  std::vector<std::string> written;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // what was done to make the model calibratable (opset upgrade)
  std::string summary;             // the summary.txt text
  int64_t samples = 0;
  int64_t data_samples = 0;  // what --data holds (samples: the first of them); 0 without data
  CheckResult check;         // the accuracy check of the plan written
  double seconds = 0.0;
  int64_t peak_rss_bytes = 0;
  distributed::RankReport rank;  // this process's part (rank 0 of 1 without a launch)
  PtqReport ptq;                 // what the PTQ stages did (empty without --ptq)
  RepairReport repair;           // the repair ladder (ran false under --repair off)
};

Result<CalibrateResult> Calibrate(const CalibrateOptions& options);
// The checks Calibrate makes before it reads anything (data or statistics given, sizes, --ptq
// with --int8, a non-file where --stats goes).
Status CheckCalibrateSource(const CalibrateOptions& options);

// "model.qdq.onnx", or "model.fp16.onnx" / "model.bf16.onnx" for --int8 off.
std::string WrittenModelName(const CalibrateOptions& options);
// Every file calibrate may write into output_dir (the artifact set's names).
std::vector<std::string> CalibrationArtifactNames(const CalibrateOptions& options);

// One calibration up to its statistics (calibration_steps.h), kept so that any number of plans
// are built from it without loading, hashing or running the model again (--compare-methods).
struct PreparedCalibration {
  LoadedModel model;
  CalibrationSites sites;
  Statistics statistics;
  CalibrateResult report;  // notes, warnings, samples and collection time so far; no plan
  std::chrono::steady_clock::time_point start;
};

// In one process: loads and hashes the model, finds the sites, checks the overrides and collects
// statistics with histograms, so that every method can be built from them (or takes
// options.from_stats / options.statistics).
Result<PreparedCalibration> PrepareCalibration(const CalibrateOptions& options);

// The plan of options.method (and overrides) from `prepared`, then options.ptq's stages; with
// options.output_dir, the artifact set (all its files or none); with options.stats_out, the
// .qkstats. `plan`: one built (and staged) already (ReadyPlan).
Result<CalibrateResult> FinishCalibration(const CalibrateOptions& options,
                                          const PreparedCalibration& prepared,
                                          const ReadyPlan* plan = nullptr);

}  // namespace quantkit::pipelines
