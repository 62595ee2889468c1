// Calibration in steps (the library side of `quantkit calibrate` and of the public
// quantkit/calibration.h; the floor the calibrate/ and ptq/ rooms share). "Steps", not "stages":
// the stages are the user's `--ptq` stages (pipelines/ptq/stages.h).
//
//   LoadFloatModel      the model once: its hash, constants promoted, shared and immutable
//   FindCalibrationSites  where TensorRT wants Q/DQ (passes/qdq_placement.h) -> activations
//   CollectStatistics   one pass of the data through the model (or merged .qkstats shards)
//   BuildPlan           statistics + method choices -> QuantPlan; no model run, so any number of
//                       methods cost one collection (calibrate --compare-methods)
//   WriteArtifacts      passes::ApplyPlan on the float model -> model.qdq.onnx, calib.cache,
//                       ranges.txt, plan.json, each written atomically
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/collect_pass.h"
#include "data/image_options.h"
#include "data/source.h"
#include "formats/qkstats.h"
#include "formats/trt_cache.h"
#include "ir/graph.h"
#include "onnx/opset_upgrade.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "passes/pass.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct LoadedModel {
  std::string path;
  std::string sha256;
  std::shared_ptr<const ir::Model> model;
  onnx_io::OpsetUpgrade upgrade;  // an opset upgrade done in memory (the file is unchanged)
  std::vector<passes::PassReport> load_passes;  // what loading rewrote (constants, If folding)
};

// Hashes the file and loads it for quantization (below opset 13 it is upgraded in memory; see
// `upgrade`). A model that already holds Q/DQ (a QAT export) is refused: a second quantization
// would stack on its own (`convert` extracts its plan).
Result<LoadedModel> LoadFloatModel(const std::string& path);

struct CalibrationSites {
  passes::PlacementOptions placement;
  std::vector<passes::QdqSite> sites;              // point into the LoadedModel's graph
  std::vector<std::string> activations;            // need statistics; sorted
  std::map<std::string, std::string> consumer_op;  // activation -> op type of its first site
  // The float part of the written model (dtype, cast_io, --keep-fp32 resolved); BuildPlan adds the
  // tensors the dtype cannot hold.
  quant::FloatPrecision float_precision;
  // The other float activations of the main graph: range-only statistics (min/max, cheap) that
  // tell BuildPlan which tensors FP16/BF16 cannot hold. Empty for an FP32 model.
  std::vector<std::string> float_tensors;
};

Result<CalibrationSites> FindCalibrationSites(const LoadedModel& model,
                                              const passes::PlacementOptions& placement,
                                              const passes::FloatOptions& floats = {});

struct Statistics {
  formats::StatsFile stats;
  std::string data_description, data_fingerprint;
  int64_t samples = 0;
};

// What the collectors keep: histograms (any method) or the range only (max; no histogram work).
enum class CollectorKind { kHistogram, kRangeOnly };

// One pass: runs the model on each batch of `next` (calibration: analysis::InRuns) until it
// returns std::nullopt. `size_hint` (-1: unknown)
// sizes the progress bar.
Result<Statistics> CollectStatistics(const LoadedModel& model, const analysis::BatchReader& next,
                                     int64_t size_hint, const CalibrationSites& sites,
                                     const analysis::PassOptions& options,
                                     CollectorKind kind = CollectorKind::kHistogram);
// Merged .qkstats shards of this model (exactly one pass over all their data).
Result<Statistics> StatisticsFromFiles(const LoadedModel& model,
                                       const std::vector<std::string>& paths);

// Names of the float activations of the model's main graph (graph inputs and node outputs typed
// float32, the types the model does not declare inferred on a copy), sorted: what the float-dtype
// check measures.
Result<std::vector<std::string>> FloatActivations(const ir::Model& model);

// Records in precision->fp32_tensors every measured tensor of `statistics` that
// precision->dtype cannot hold (passes::FloatRangeProblem); returns how many were measured.
int64_t MarkFp32Tensors(const Statistics& statistics, quant::FloatPrecision* precision);

// One pass of `data` (the first `samples`, 0: all) through the model keeping only the range of
// every float activation of its main graph: the float-dtype check of a plan that has no
// statistics (convert --data). Bounded memory: a few numbers per tensor.
Result<Statistics> CollectFloatRanges(const LoadedModel& model, const std::string& data,
                                      const data::ImageOptions& image, int64_t samples,
                                      int64_t batch_size, bool progress);

struct MethodChoice {
  quant::MethodRequest method;
  // By tensor name or by the op type of the tensor's consumer.
  std::map<std::string, quant::MethodRequest> overrides;
};

// The method of one activation: an override by tensor name, else by the op type of its first
// consumer, else the default.
const quant::MethodRequest& MethodFor(const std::string& tensor, const CalibrationSites& sites,
                                      const MethodChoice& methods);

// Every override must name a quantized activation or a consumer op type: one that names nothing
// would silently calibrate with the default method (kNotFound, with the closest names).
Status CheckOverrides(const CalibrationSites& sites, const MethodChoice& methods);

// The share of the calibration data held out when a workflow judges plans against FP32 without a
// held-out set (calibrate --budget, --method auto, the smoothquant stage choosing its alpha): one
// sample in four, enough to see a collapse against FP32, few enough to keep the ranges of the
// calibration part (pipelines/calibrate/holdout.h splits it).
inline constexpr int64_t kHoldoutShareDivisor = 4;

// A non-max method that clips more than this share of a tensor's values is reported: diagnose's
// entropy_clips threshold, the level at which the issue-20 models lost their accuracy.
inline constexpr double kClipWarnShare = 0.01;

struct ActivationEntry {
  quant::TensorQuant entry;
  std::vector<std::string> warnings;  // non-finite values left out; a range that stays in float
  double clipped_share = 0.0;  // share of values above the amax (0 for max, which clips none)
};

// Why a body tensor that no calibration sample computed stays in float.
inline constexpr char kNeverComputedReason[] =
    "was never computed on the calibration data (an If branch no sample took, or a Loop/Scan body "
    "that never ran): kept in float";

// One activation's plan entry from its statistics: the amax of `method`, the warnings it raises
// and the share of values it clips. Needs the collector's histogram for any method but max.
// A collector that saw no value gives an entry kept in float (kNeverComputedReason), no warning.
Result<ActivationEntry> BuildActivationEntry(const std::string& tensor,
                                             const quant::TensorCollector& collector,
                                             const quant::MethodRequest& method);

struct BuiltPlan {
  quant::QuantPlan plan;
  std::vector<std::string> warnings;
};

// Activations from the statistics (BuildActivationEntry, one amax per method; one warning when
// some clip more than kClipWarnShare), weights per channel (or per tensor) from the model's
// initializers, excluded nodes recorded as plan.float_nodes so that every later use of the plan
// leaves them in float, and sites.float_precision with the tensors whose calibrated range the
// float dtype cannot hold (passes::FloatRangeProblem) in fp32_tensors. The one plan building of
// calibrate, --compare-methods, Python and the public quantkit/calibration.h.
Result<BuiltPlan> BuildPlan(const Statistics& statistics, const LoadedModel& model,
                            const CalibrationSites& sites, const MethodChoice& methods);

// What happened inside If/Loop/Scan bodies, for the summary: notes on the weighted ops quantized
// there, warnings naming those left in float (a body no sample ran; LSTM/GRU/RNN, which TensorRT's
// Q/DQ recipe leaves in float) and why. Empty for a model without bodies or recurrent ops.
struct BodyReport {
  std::vector<std::string> notes, warnings;
};
BodyReport ReportBodies(const LoadedModel& model, const CalibrationSites& sites,
                        const quant::QuantPlan& plan);

struct ArtifactReport {
  std::vector<std::string> written;
  passes::PassReport inserted;  // ApplyPlan's
};

// Writes model.qdq.onnx (passes::ApplyPlan, TensorRT placement, the plan's float dtype, weights
// stored as `weights`), calib.cache, ranges.txt and plan.json into `dir` (created when missing).
Result<ArtifactReport> WriteArtifacts(const LoadedModel& model, const quant::QuantPlan& plan,
                                      const passes::PlacementOptions& placement,
                                      const std::string& dir,
                                      const formats::TrtCacheWriteOptions& cache,
                                      passes::WeightStorage weights = passes::WeightStorage::kInt8);

}  // namespace quantkit::pipelines
