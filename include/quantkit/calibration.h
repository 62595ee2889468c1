// quantkit's public calibration API: calibration in steps, each usable on its own.
//
//   Model model     = LoadModel("model.onnx")
//   Sites sites     = FindSites(model, placement)              where TensorRT wants Q/DQ
//   Statistics s    = CollectStatistics(model, stream, sites)  one pass over the data
//   Plan plan       = BuildPlan(s, sites, methods)             no model run: any method, any time
//   WriteArtifacts(model, plan, "out/")                        model.qdq.onnx, calib.cache, ...
//
// or all of it in one call, exactly as `quantkit calibrate`: Calibrate(CalibrateOptions).
//
// Statistics are streaming and mergeable: collect on shards (processes, machines), Merge() them in
// any order, and BuildPlan gives exactly the plan of one pass over all the data. Several methods
// cost one collection (BuildPlan per method). Model, Sites, Statistics and Plan are cheap-to-copy
// handles (shared, immutable contents).
//
// Errors are values: every function returns Status/Result with a one-line message naming the
// file, tensor or input (quantkit/status.h; ExitCodeFor maps codes to the CLI's exit codes).
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "quantkit/data_source.h"
#include "quantkit/status.h"

namespace quantkit {

// A float ONNX model loaded for quantization (constants promoted to initializers).
class Model {
 public:
  struct Impl;
  Model() = default;
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const std::string& path() const;
  const std::string& sha256() const;  // of the file's bytes (plan provenance)
  std::vector<std::string> input_names() const;
  const Impl& impl() const { return *impl_; }
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<const Impl> impl_;
};

Result<Model> LoadModel(const std::string& path);

// The input names a batch must feed, of any ONNX model (float, or already holding Q/DQ, which
// LoadModel refuses): for callers that only need to shape data for Evaluate and the others.
Result<std::vector<std::string>> ModelInputNames(const std::string& path);

// Where Q/DQ pairs go (TensorRT explicit quantization; docs/calibration-spec.md §5).
struct Placement {
  bool per_channel_weights = true;
  bool quantize_residual_add = true;
  std::set<std::string> exclude_nodes;     // node names kept in float (each must exist)
  std::set<std::string> exclude_op_types;  // op types kept in float

  // A name as the CLI's --exclude takes it: a node name or an op type (both sets get it).
  void Exclude(const std::string& name) {
    exclude_nodes.insert(name);
    exclude_op_types.insert(name);
  }
};

struct Site {
  std::string tensor;    // the quantized tensor
  std::string consumer;  // the node reading it through Q/DQ
  int input_index = 0;
  bool weight = false;
  int64_t axis = -1;  // per-channel axis of a weight; -1 per tensor
};

// The Q/DQ sites of a model under a placement, and the activations that need statistics.
struct Sites {
  Model model;
  Placement placement;
  std::vector<Site> sites;               // topological order of consumers
  std::vector<std::string> activations;  // sorted, deduplicated
};

Result<Sites> FindSites(const Model& model, const Placement& placement = {});

// The exact range of one tensor's values over every sample seen.
struct TensorRange {
  float min = 0, max = 0;  // over the finite values (+inf/-inf while none was seen)
  float amax = 0;          // max |x| over the finite values
  int64_t count = 0;       // elements seen, NaN and Inf included
  int64_t nan_count = 0, inf_count = 0;
};

// Calibration statistics (streaming histograms and exact ranges per activation).
class Statistics {
 public:
  struct Impl;
  Statistics() = default;
  explicit Statistics(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

  std::vector<std::string> tensors() const;
  int64_t samples() const;
  const std::string& model_sha256() const;
  const std::string& data_description() const;
  const std::string& data_fingerprint() const;  // what identifies the data (plan provenance)
  // max |x| over the finite values seen for `tensor`.
  Result<float> AbsMax(const std::string& tensor) const;
  // The exact range of `tensor` (min, max, amax, element counts).
  Result<TensorRange> Range(const std::string& tensor) const;
  // The amax a calibration method ("max", "entropy", "percentile[:P]", "mse") gives `tensor`.
  Result<float> Amax(const std::string& tensor, const std::string& method) const;
  // The same for every tensor; the method is checked even when there is no tensor.
  Result<std::map<std::string, float>> Amax(const std::string& method) const;

  // Exact merge: same result as one pass over both data sets, whatever the order.
  Result<Statistics> Merge(const Statistics& other) const;
  // The .qkstats format (docs/histogram-policy.md): bytes, or an atomically written file.
  std::string Serialize() const;
  static Result<Statistics> Parse(const std::string& bytes, const std::string& source_name);
  Status Save(const std::string& path) const;
  static Result<Statistics> Load(const std::string& path);
  // Several .qkstats files merged exactly (shards). With `model_sha256`, each must have been
  // collected on that model (Model::sha256()).
  static Result<Statistics> Load(const std::vector<std::string>& paths,
                                 const std::string& model_sha256 = "");

  const Impl& impl() const { return *impl_; }
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<const Impl> impl_;
};

struct CollectOptions {
  bool progress = false;  // a bar on stderr when it is a terminal
  // Samples per model run, cut at multiples of it in stream order whatever the stream's batches
  // (the statistics do not depend on them; 1: nor on the order). 0: the CLI's default (8 on the
  // CPU). Models whose runs cannot be stacked run one sample at a time.
  int64_t run_batch = 0;
  // Samples a StatisticsCollector will be given, for the progress bar (0: unknown).
  // CollectStatistics takes the stream's size_hint().
  int64_t expected_samples = 0;
};

// One pass of `stream` through the FP32 model, collecting every activation of `sites`: a
// StatisticsCollector fed each batch of the stream in turn. The statistics' description is
// stream.Describe().
Result<Statistics> CollectStatistics(const Model& model, BatchStream& stream, const Sites& sites,
                                     const CollectOptions& options = {});

// One statistics pass fed by the caller, batch by batch (push; CollectStatistics pulls a stream):
// for data that arrives in the caller's loop (a Python DataLoader, an onnxruntime reader). The
// model runs on the CLI's runs whatever the batches: the samples are cut, in the order given,
// into runs of `run_batch` samples at multiples of it, so the statistics are byte-identical to
// `quantkit calibrate`'s on the same samples. Samples that do not fill a run wait for the next
// batch or for Finish(). Not thread-safe; one pass per collector.
class StatisticsCollector {
 public:
  struct Impl;
  // Activations of `sites` (FindSites on this model).
  static Result<StatisticsCollector> Create(const Model& model, const Sites& sites,
                                            const CollectOptions& options = {});
  // Activations of `placement`, whose excluded names need not exist (as the CLI's --exclude,
  // where a name may be a node or an op type).
  static Result<StatisticsCollector> Create(const Model& model, const Placement& placement,
                                            const CollectOptions& options = {});
  StatisticsCollector(StatisticsCollector&&) noexcept;
  StatisticsCollector& operator=(StatisticsCollector&&) noexcept;
  ~StatisticsCollector();

  // One batch: every model input fed, no other name, each checked as the CLI checks data (dtype,
  // per-sample dims; messages name "batch <index>" and the input). Arrays are read in place and
  // kept alive (ArrayView::keep_alive) until their samples have run; the data's SHA-256 covers
  // every byte observed. Runs the model on the runs this batch completes.
  Status Observe(const InputBatch& batch);
  // Every sample of a data spec (OpenDataSpec's), read and run exactly as `quantkit calibrate
  // --data` does; its description and fingerprint become the statistics'. A spec is read whole:
  // not mixed with Observe() in one pass.
  Status ObserveDataSpec(const std::string& spec, const DataSpecOptions& options = {});
  // `batch` as Observe() would feed it to the model, checked (errors name "batch") but not run:
  // the caller's memory wherever no copy is needed.
  Result<InputBatch> Conform(const InputBatch& batch) const;
  // Runs the samples still held back, then returns the statistics (once; fails without samples).
  // Observed batches are described as "<description> (<N> samples in <B> batches)" with the
  // fingerprint "sha256:<hex>" of their bytes.
  Result<Statistics> Finish(const std::string& description);

  const std::vector<std::string>& input_names() const;  // the model's, in order
  int64_t samples() const;                              // observed so far
  int64_t batches() const;                              // Observe() calls that succeeded
  int64_t run_batch() const;                            // samples per model run

  Impl& impl() { return *impl_; }

 private:
  explicit StatisticsCollector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Per-tensor quantization of one tensor in a plan.
struct TensorScale {
  std::string tensor;
  bool quantized = true;
  std::string reason;  // why not quantized, or a diagnostic
  bool weight = false;
  std::vector<float> scale;  // 1: per tensor; N: per channel along axis
  std::vector<float> amax;
  std::vector<int32_t> zero_point;
  int64_t axis = -1;
  std::string source;  // method label, "qdq:<node>", "cache"
  std::string role;    // "activation" | "weight"
  std::string dtype;   // "int8" | "uint8"
};

// What a TensorRT calibration cache's header says (the cache's body is the plan's).
struct CacheOptions {
  std::string trt_version = "8.6.1";
  std::string calibrator = "EntropyCalibration2";  // or "MinMaxCalibration" (header only)
};

// The plan file formats Plan::Write writes whatever the path's extension.
enum class PlanFormat { kJson, kTrtCache, kRangesText };

// A QuantPlan (docs/architecture.md, decision 4): the hub every format converts through.
class Plan {
 public:
  struct Impl;
  Plan() = default;
  explicit Plan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  // A plan with no tensor, to fill by hand (WithActivationAmax).
  static Plan Empty();

  std::vector<TensorScale> tensors() const;
  int64_t num_quantized() const;
  std::optional<TensorScale> Find(const std::string& tensor) const;
  std::map<std::string, std::string> float_nodes() const;  // node -> reason
  std::string method() const;                              // provenance
  // A copy that keeps `nodes` in float (mixed precision), each with `reason`.
  Plan WithFloatNodes(const std::vector<std::string>& nodes, const std::string& reason) const;
  // A copy where `tensor` is a per-tensor symmetric int8 activation of range `amax`
  // (scale = amax / 127), added or replacing its entry; a non-positive or non-finite amax keeps
  // it in float with a reason. Fails when the resulting plan is invalid.
  Result<Plan> WithActivationAmax(const std::string& tensor, float amax,
                                  const std::string& source) const;

  std::string ToJson() const;  // quantkit's plan JSON
  static Result<Plan> FromJson(const std::string& json, const std::string& source_name);
  // Any plan file by extension: .json, .cache/.calib/.table (TensorRT), .txt/.ranges, or a
  // Q/DQ .onnx (its scales are extracted).
  static Result<Plan> Read(const std::string& path);
  // .json / .cache / .txt by extension (TensorRT 8.6 EntropyCalibration2 header for caches).
  Status Write(const std::string& path) const;
  // `format` whatever the extension; `cache` applies to kTrtCache only. Atomic.
  Status Write(const std::string& path, PlanFormat format, const CacheOptions& cache = {}) const;
  // The calibration cache's text, as Write(path, PlanFormat::kTrtCache, cache) writes it.
  Result<std::string> CacheText(const CacheOptions& cache = {}) const;

  const Impl& impl() const { return *impl_; }
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// The method of every activation: `method` by default, overridden per tensor name or per op
// type of the tensor's consumer. Names are parsed here ("percentile:99.9"); unknown ones and
// overrides naming no tensor or op type of the model are errors.
struct MethodChoices {
  std::string method = "max";
  std::map<std::string, std::string> overrides;
};

struct BuiltPlan {
  Plan plan;
  std::vector<std::string> warnings;  // tensors without statistics, NaN/Inf seen, constant ones
};

// Activations from the statistics, weights from the model's initializers; no model run.
Result<BuiltPlan> BuildPlan(const Statistics& statistics, const Sites& sites,
                            const MethodChoices& methods = {});

struct ArtifactOptions {
  Placement placement;  // as given to FindSites for this plan
  CacheOptions cache;   // calib.cache header
};

struct Artifacts {
  std::vector<std::string> written;  // model.qdq.onnx, calib.cache, ranges.txt, plan.json
  int activation_pairs = 0, weight_pairs = 0;
};

// Writes the plan's TensorRT artifacts into `dir` (created if needed), each file atomically.
// Q/DQ go where options.placement puts them, the plan's float_nodes excluded (passes::ApplyPlan,
// the code every quantkit command uses).
Result<Artifacts> WriteArtifacts(const Model& model, const Plan& plan, const std::string& dir,
                                 const ArtifactOptions& options = {});

// Writes only the Q/DQ model (`path`, atomically; `written` names it). Q/DQ go where
// `placement` puts them for a calibrated plan, and where the source model had them for a plan
// read from a Q/DQ model (passes::ApplyPlan, placement "auto"); float_nodes stay in float;
// weight scales the plan lacks come from the model's initializers.
Result<Artifacts> WriteQdqModel(const Model& model, const Plan& plan, const std::string& path,
                                const Placement& placement = {});

// quantkit's data specs (the CLI's --data: NAME=FILE.npy, FILE.npz, DIR, image folders with
// declared preprocessing, fashion-mnist[:split], FILE.json) as a stream checked against `model`.
Result<std::unique_ptr<BatchStream>> OpenDataSpec(const Model& model, const std::string& spec,
                                                  const DataSpecOptions& options = {});

// The float part of a written Q/DQ model (docs/strongly-typed.md): TensorRT 11 computes each
// layer in the type the ONNX file gives it, so what is not INT8 runs in this dtype.
inline constexpr const char* kDefaultFloatDTypeName = "fp16";
struct FloatPart {
  std::string dtype;     // fp16 | bf16 | fp32; "": the default, kDefaultFloatDTypeName
  bool cast_io = false;  // graph inputs and outputs in dtype too (else FP32, cast inside)
  std::vector<std::string> keep_fp32;   // node names or op types computed in FP32 (each must match)
  std::string weight_storage = "int8";  // int8 (INT8 initializers) | float (Q/DQ on float weights)
  bool int8 = true;  // false: no Q/DQ at all, the dtype conversion alone (model.<dtype>.onnx)
};

// The PTQ stages after the range choice (docs/ptq.md), their data and memory.
inline constexpr int64_t kDefaultPtqSamples = 256, kDefaultPtqBatch = 32,
                         kDefaultPtqMemoryMib = 1024;
struct PtqChoices {
  // In order, NAME[:KEY=VALUE...][,NAME...]: smoothquant, seqmse, adaround, bias-correction, e.g.
  // "seqmse,adaround:iterations=500". "": none. Parsed and range-checked before any compute.
  std::string stages;
  // The first N calibration samples (fewer when memory_mib says so).
  int64_t samples = kDefaultPtqSamples;
  int64_t batch = kDefaultPtqBatch;           // samples per cached run and per AdaRound step
  int64_t memory_mib = kDefaultPtqMemoryMib;  // cached layer activations the stages may hold
  uint64_t seed = 0;                          // of the stages' random draws
};

// N processes of one job (torchrun, srun, a PyTorchJob; docs/distributed.md): each rank collects
// its shard, rank 0 merges exactly and writes everything.
inline constexpr double kDefaultDistributedTimeoutSeconds = 1800;  // torch's default too
struct DistributedChoices {
  bool required = false;  // fail unless launched so (a launch is detected anyway)
  // At the rendezvous and at each step, 1 to 86400.
  double timeout_seconds = kDefaultDistributedTimeoutSeconds;
};

// The accuracy check's automatic size: one calibrated sample in kCheckShareDivisor, at least
// kCheckMinSamples and at most kCheckMaxSamples.
inline constexpr int64_t kAutoCheckSamples = -1;
inline constexpr int64_t kCheckShareDivisor = 16, kCheckMinSamples = 16, kCheckMaxSamples = 256;
// The largest budget of a fallback search (calibrate's --budget and fallback's): points of
// top1/agreement; a rel_mse budget is a ratio below it. The library checks it; the CLI reads it.
inline constexpr double kMaxBudget = 100;

// The whole of `quantkit calibrate` in one call, with its exact results (the same plan.json,
// provenance included, for the same data spec): load, find the sites, collect (or take
// `statistics`), build the plan, and with `output_dir` write model.qdq.onnx, calib.cache,
// ranges.txt, plan.json and summary.txt (all or none). The CLI is this call and a print.
struct CalibrateOptions {
  std::string model;
  std::string data;       // a data spec (OpenDataSpec); unused when `statistics` is valid
  Statistics statistics;  // collected earlier (merged, loaded): no model run
  std::vector<std::string> from_stats;  // .qkstats shards merged instead of a model run
  DataSpecOptions data_options;         // batch size, sample cap and image preprocessing of `data`
  int64_t run_batch = 0;                // samples per model run, as CollectOptions::run_batch
  // methods.method may also be "auto": every method from one statistics pass, the best on
  // held-out data vs FP32, then refined per tensor; with ptq.stages each stage is tried too.
  MethodChoices methods;
  // The table of max/entropy/percentile/mse on held-out data; the best is written.
  bool compare_methods = false;
  // Then the fallback search: the fewest layers kept in float that bring INT8 within `budget` of
  // FP32 on held-out data (points for top1/agreement, a ratio for rel_mse). Needs output_dir.
  std::optional<double> budget;
  // auto, compare_methods and budget: top1 | agreement | rel_mse | frame_agreement |
  // decode_agreement; "": by the output.
  std::string metric;
  Placement placement;
  FloatPart floats;
  PtqChoices ptq;
  std::string output_dir;  // empty: the plan only
  std::string stats_out;   // also write the statistics (.qkstats) here
  CacheOptions cache;
  bool progress = false;  // a bar on stderr when it is a terminal
  // The accuracy check of the plan (docs/accuracy.md): -1 sizes it from the calibration (one
  // sample in 16, 16 to 256), 0 turns it off, N > 0 checks N samples. Its samples: the first of
  // `holdout` when given, else those of `data` that follow the calibrated ones, else the last
  // calibrated ones ("in-sample"). With `statistics` alone it needs `holdout`.
  int64_t check_samples = kAutoCheckSamples;
  // Held-out data (a data spec) for the check, auto, compare_methods (default: fashion-mnist:val
  // for fashion-mnist data) and budget (default: the last quarter of `data`, left out of the
  // calibration); its first `holdout_samples` (0: all).
  std::string holdout;
  int64_t holdout_samples = 0;
  // "auto": when the check misses its target, calibrate repairs the plan itself (the ladder of
  // docs/accuracy.md: auto, the PTQ stages, the fallback), each candidate judged on held-out
  // samples (the last of `data` when nothing else holds them out); "off": the plan as asked.
  // Applies to a plain calibration (not compare_methods, method auto or budget).
  std::string repair = "auto";
  // The ladder's time cap in seconds, 0 < s <= kMaxRepairSeconds; 0: kRepairTimeFactor x the time
  // to the first verdict, at least kRepairMinSeconds.
  double repair_time_seconds = 0;
  DistributedChoices distributed;
};

inline constexpr double kRepairTimeFactor = 10, kRepairMinSeconds = 60,
                        kMaxRepairSeconds = 7 * 24 * 3600.0;

// One rung of the repair ladder.
struct CalibrateRepairRung {
  std::string name;      // "as asked", "auto", "smoothquant,bias-correction", "seqmse", "fallback"
  std::string detail;    // the candidate (method, tensors changed, layers in float)
  std::string skipped;   // non-empty: not tried, and why
  bool passes = false;   // met the target
  double agreement = 0;  // NaN unless the output is a class vector
  double rel_mse = 0;
  double seconds = 0;
};

struct CalibrateRepair {
  bool ran = false;
  std::string not_run;  // why the ladder did not run although repair was "auto"
  std::string target, holdout;
  double cap_seconds = 0, seconds = 0;
  std::vector<CalibrateRepairRung> rungs;
  int kept = -1;  // the rung written
  bool met = false;
  std::string next;  // target missed: what to run next
};

// The plan against FP32 on held-out samples: the "check:" line of the summary.
struct CalibrateCheck {
  bool ran = false;
  std::string data;  // the samples' description
  std::string
      origin;  // "held-out (--holdout)", "held-out" or "in-sample" (the calibration saw them)
  int64_t samples = 0;
  double agreement = 0;  // argmax agreement with FP32 (NaN unless the output is a class vector)
  double top1 = 0, fp32_top1 = 0;  // NaN without labels
  double rel_mse = 0;              // first output's relative MSE vs FP32
  double seconds = 0;
  std::string
      warning;  // beyond the thresholds (also in CalibrateReport::warnings); empty when fine
};

struct CalibrateReport {
  Plan plan;
  std::vector<std::string> written, warnings;
  std::vector<std::string> notes;  // what was done to make the model calibratable (opset upgrade)
  std::string summary;             // the summary.txt text
  // What `quantkit calibrate` prints on stdout: the comparison table (compare_methods, auto) or
  // the budget search's report, the summary and a "wrote FILE" line per file. Empty on ranks > 0.
  std::string text;
  std::string json;                   // the report as JSON (compare_methods, auto: the table)
  std::optional<bool> within_budget;  // budget: whether the search reached it
  int rank = 0, world_size = 1;
  std::string rank_line;  // under a launch: this rank's shard, times and merge
  int64_t samples = 0;
  double seconds = 0;
  int64_t peak_rss_bytes = 0;
  CalibrateCheck check;
  CalibrateRepair repair;  // the repair ladder (ran false with repair "off" or another mode)
};

Result<CalibrateReport> Calibrate(const CalibrateOptions& options);

// The checks Calibrate makes on `options` before reading anything (method names, cache header,
// image preprocessing): lets a caller fail before it collects statistics itself.
Status CheckCalibrateOptions(const CalibrateOptions& options);

// The PTQ stages, their parameters, defaults and ranges, as `calibrate --help` lists them.
std::string DescribePtqStages();

}  // namespace quantkit
