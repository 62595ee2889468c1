// quantkit's public workflow entry points beside calibration (quantkit/calibration.h): the
// library behind `quantkit eval | analyze | fallback | diagnose | convert | run`. Each takes an
// options struct of plain values and returns a report: the key numbers typed, plus `text` (what
// the CLI prints) and `json` (the full machine-readable report, stable field names).
//
// Paths name files; data specs are the CLI's --data strings (quantkit/calibration.h
// OpenDataSpec). Errors are values (quantkit/status.h). Nothing here prints, except the progress
// bar on stderr that `progress` asks for.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/calibration.h"
#include "quantkit/status.h"

namespace quantkit {

// eval: a model over data; top-1/top-5 with labels; agreement with a reference model; with
// `plan` the float model runs with that plan's INT8 simulation (placement "auto" | "tensorrt" |
// "plan").
struct EvaluateOptions {
  std::string model, data;
  std::string reference_model;  // optional
  std::string plan;             // optional: simulate this plan on `model`
  Plan loaded_plan;  // a plan in memory, simulated instead of the file `plan` when valid()
  std::string placement = "auto";
  // Extra metrics vs the reference: top1, agreement, rel_mse, frame_agreement, decode_agreement.
  std::vector<std::string> metrics;
  int64_t samples = 0, batch_size = 64;
  ImagePreprocessing image;
  // Written when set (rank 0): argmax per sample (int64 [N]) and the first output (float32
  // [N, width]) as .npy.
  std::string save_predictions, save_outputs;
  bool progress = false;           // a bar on stderr when it is a terminal
  DistributedChoices distributed;  // each rank evaluates its shard; rank 0 holds the totals
};
struct EvaluateReport {
  int64_t samples = 0;
  std::optional<double> top1, top5;
  std::optional<double> argmax_agreement, cosine, sqnr_db, max_abs_error;  // with a reference
  std::map<std::string, double> metrics;  // every metric computed, by name
  double seconds = 0;
  double model_seconds = 0, reference_seconds = 0;  // inside the model's runs and the reference's
  std::vector<std::string> written;
  std::vector<std::string> warnings;  // plan entries that could not be used (simulated in float)
  std::string text, json;  // what `quantkit eval` prints, and with --json; empty on ranks > 0
  int rank = 0, world_size = 1;
  std::string rank_line;  // under a launch: this rank's shard and times
};
Result<EvaluateReport> Evaluate(const EvaluateOptions& options);

// The plan-vs-FP32 workflows share these: the FP32 model, a plan (a file of any format, or one
// in memory), the data.
struct PlanEvaluationOptions {
  std::string model, plan, data;
  Plan loaded_plan;  // used instead of the file `plan` when valid()
  std::string placement = "auto";
  int64_t samples = 256, batch_size = 64;
  // top1, agreement, rel_mse, frame_agreement, decode_agreement; empty: top1 with labels,
  // agreement.
  std::vector<std::string> metrics;
  DistributedChoices distributed;  // each rank evaluates its shard of every trial
};

// analyze: per quantized tensor, the error it causes alone and accumulated, ranked worst first;
// with `layers` "float" or "both", per tensor of the FP16/BF16 float part the share of the FP16
// cost that keeping it in FP32 recovers, and the verified --keep-fp32 fix (docs/strongly-typed.md).
struct AnalyzeOptions {
  PlanEvaluationOptions evaluation;
  bool accumulated = true;
  std::string layers = "int8";  // "int8" | "float" | "both"
  int64_t top = 0;              // rows of the text's table (0: all)
  bool progress = false;        // a bar on stderr when it is a terminal
};
struct AnalyzeReport {
  std::vector<std::string> ranked_tensors;  // worst first (INT8 analysis)
  std::vector<std::string>
      keep_fp32;                      // the float part's recommended FP32 nodes (layers float/both)
  std::vector<std::string> warnings;  // e.g. plan tensors matching no model tensor
  std::string text, json;             // empty on ranks > 0 (every rank has the numbers)
  int rank = 0, world_size = 1;
  std::string rank_line;  // under a launch: this rank's shard, trials and time
};
Result<AnalyzeReport> Analyze(const AnalyzeOptions& options);

// fallback: the smallest set of layers to keep in float so INT8 comes within `budget` of FP32.
inline constexpr int64_t kDefaultTrialCacheMib = 512;
struct FallbackOptions {
  PlanEvaluationOptions evaluation;
  double budget = 0.5;
  int max_float_layers = 0;
  std::string output_dir;  // plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json
  std::string float_precision = "fp16";  // named in layer_precisions: fp16 | fp32
  // The float part of the written model and of every trial (as for ConvertOptions: all unset
  // keeps the plan's own).
  FloatPart floats;
  // Activations cached for trials to start from (0: every trial runs the whole model; same
  // results).
  int64_t trial_cache_mib = kDefaultTrialCacheMib;
  bool progress = false;  // a bar on stderr when it is a terminal
};
struct FallbackReport {
  Plan plan;  // with float_nodes
  std::vector<std::string> float_layers;
  double fp32_value = 0, int8_value = 0, final_value = 0;
  bool within_budget = false;    // the CLI exits 1 when false
  std::string layer_precisions;  // trtexec --layerPrecisions value
  std::vector<std::string> written, warnings;
  std::string text, json;  // empty on ranks > 0
  int rank = 0, world_size = 1;
  std::string rank_line;
};
Result<FallbackReport> Fallback(const FallbackOptions& options);

// diagnose: is the calibration data enough, stable, like the reference data, preprocessed as
// the model expects, batch-independent? (docs/diagnose.md)
inline constexpr int64_t kMaxDiagnoseChunks = 256, kMaxDiagnoseResamples = 100000;
struct DiagnoseOptions {
  std::string model, data, reference_data;
  int64_t samples = 0, reference_samples = 0, batch_size = 32;
  std::string method = "max";
  // The declared model-input expectation: "range=LO:HI" and/or "mean=M[/M..],std=S[/S..]".
  std::string expect;
  Placement placement;  // exclusions as calibrate takes them
  // Collector sets kept (curves, bootstrap; memory grows with it), 1..kMaxDiagnoseChunks.
  int64_t chunks = 16;
  int64_t bootstrap = 64;      // bootstrap resamples, 0..kMaxDiagnoseResamples
  int64_t subsets = 16;        // random half-subsets for the stability CV, 0..kMaxDiagnoseResamples
  uint64_t seed = 1;           // of the resampling
  double ci_tolerance = 0.05;  // wanted 95% interval half-width of each scale (relative), (0, 1]
  double cv_tolerance = 0.05;  // coefficient of variation above which a scale is unstable, (0, 1]
  int64_t batch_check_samples = 16;  // run at batch 1 and batch B for batch dependence (0: skip)
  std::string output_dir;            // report.txt, report.json, SVG pictures
  bool progress = false;             // a bar on stderr when it is a terminal
  DistributedChoices distributed;    // each rank its shard; rank 0 analyses and writes
};
struct DiagnoseReport {
  bool clean = false;   // no error or warning finding
  bool enough = false;  // enough samples for stable scales
  int64_t suggested_samples = 0;
  std::vector<std::string> findings;  // "severity: message"
  std::vector<std::string> written;
  std::string text, json;  // the report (text: what `quantkit diagnose` prints); empty on ranks > 0
  int rank = 0, world_size = 1;
  std::string rank_line;
};
Result<DiagnoseReport> Diagnose(const DiagnoseOptions& options);

// convert: between every pair of plan formats through the QuantPlan hub (docs/cli.md):
// Q/DQ or QOperator ONNX, TensorRT cache, plan JSON, ranges text; plan + `model` -> Q/DQ ONNX.
struct ConvertOptions {
  std::string input, output;
  std::string model;                   // float model, for plan -> Q/DQ ONNX
  std::string placement = "tensorrt";  // "tensorrt" | "plan" (where the source quantized)
  bool qdq_output = false;             // ONNX -> ONNX: write the TensorRT Q/DQ model
  CacheOptions cache;                  // a written calib.cache's header
  // The float part of a written Q/DQ model. dtype, cast_io and keep_fp32 all unset: the float
  // precision a plan.json records (else the default, fp16). weight_storage applies; int8 must be
  // true.
  FloatPart floats;
  std::string float_precision = "fp16";  // named in the layer_precisions string: fp16 | fp32
  // plan -> Q/DQ ONNX: data to check the float dtype's ranges on first, and to measure the written
  // model against `model` (the migration check of an implicit-INT8 deployment to TensorRT 11).
  std::string data;
  ImagePreprocessing image;
  int64_t samples = 0, batch_size = 32;
};
struct ConvertReport {
  std::vector<std::string> written, messages;
  std::string layer_precisions;  // trtexec --layerPrecisions for the layers kept in float
  std::string json;
};
Result<ConvertReport> Convert(const ConvertOptions& options);

// lint: TensorRT explicit-quantization checks on a Q/DQ model (docs: `quantkit lint`).
struct LintOptions {
  std::string model;
};
struct LintFinding {
  std::string rule;      // "QK001"
  std::string severity;  // "error" (TensorRT rejects the model) | "warning" (slow) | "info"
  std::string node, op_type;
  std::string message, why, fix;
};
struct LintReport {
  std::vector<LintFinding> findings;
  int quantize_nodes = 0, dequantize_nodes = 0;
  std::string worst = "info";  // the most severe finding's severity ("info" when none)
  int exit_code = 0;           // the CLI's: 0 clean (notes only), 1 warnings, 2 errors
  std::string text, json;
};
Result<LintReport> Lint(const LintOptions& options);

// tensor-calib: the amax each calibration method gives one tensor (a .npy file of any float or
// integer dtype), from one |x| histogram of `bins` bins.
inline constexpr int64_t kDefaultTensorCalibBins = 2048, kMinTensorCalibBins = 1,
                         kMaxTensorCalibBins = 65536;
struct TensorCalibOptions {
  std::string file;
  std::vector<std::string> methods = {"all"};  // max, entropy, percentile[:P], mse, or all
  int64_t bins = kDefaultTensorCalibBins;
};
struct TensorMethodAmax {
  std::string method;  // its label, e.g. "percentile:99.99"
  float amax = 0;
  int64_t bin = -1;           // the histogram bin the method chose (-1: none, max)
  std::string trt_scale_hex;  // amax / 127 as TensorRT's cache writes it
};
struct TensorCalibReport {
  std::vector<TensorMethodAmax> methods;
  std::string text, json;  // what `quantkit tensor-calib` prints
};
Result<TensorCalibReport> CalibrateTensorFile(const TensorCalibOptions& options);

// inspect: a model's versions, inputs/outputs, op histogram and weights (any ONNX model).
struct ModelInspection {
  int64_t ir_version = 0, nodes = 0;
  std::vector<std::string> inputs, outputs;
  std::string text, json;  // what `quantkit inspect` prints; json with sorted keys
};
Result<ModelInspection> InspectModel(const std::string& path);

// cache inspect | diff | check: TensorRT calibration caches read, compared and checked. Each
// report has `text` (what `quantkit cache` prints) and `problems`, the CLI's exit code 1 when > 0.
struct CacheInspectReport {
  int entries = 0;
  int bad_scales = 0;  // NaN, Inf, negative, zero or denormal
  int problems = 0;    // = bad_scales
  std::string text, json;
};
Result<CacheInspectReport> InspectCache(const std::string& path);

struct CacheDiffReport {
  std::vector<std::string> added, removed, changed;  // tensors; changed: |b - a| / |a| > rtol
  bool header_differs = false;
  int problems = 0;  // every difference
  std::string text;
};
Result<CacheDiffReport> DiffCaches(const std::string& a, const std::string& b, double rtol = 1e-6);

struct CacheCheckOptions {
  std::string cache, model;
  std::string trt_version;  // "": not checked; else the TensorRT that will read the cache
  std::string calibrator;   // "": not checked; else EntropyCalibration2 | MinMaxCalibration
};
struct CacheCheckReport {
  std::vector<std::string> missing, stale, header_issues, bad_scales;
  int matched = 0;
  int problems = 0;
  std::string text;
};
Result<CacheCheckReport> CheckCache(const CacheCheckOptions& options);

// data: what a data spec feeds a model after its declared preprocessing, written as
// output_dir/<input>.npy (and labels.npy when the data has labels), one set or nothing. Holds
// the samples in memory: for checking preprocessing on a few images, not for whole datasets.
struct WriteDataOptions {
  std::string model, data, output_dir;
  ImagePreprocessing image;
  int64_t samples = 16;  // the first N (0: all)
};
struct WriteDataReport {
  std::string source;  // the data's description
  std::string text;    // "SOURCE -> DIR"
};
Result<WriteDataReport> WriteData(const WriteDataOptions& options);

// run: a model on .npy inputs; outputs (and dumped intermediates) written as .npy.
struct RunOptions {
  std::string model;
  std::map<std::string, std::string> inputs;  // graph input name -> .npy path
  std::string output_dir = ".";
  std::vector<std::string> dump;  // intermediate tensors to write too
  bool dump_all = false;
};
struct RunReport {
  std::vector<std::string> outputs;  // one summary line per graph output
  std::vector<std::string> written;
};
Result<RunReport> Run(const RunOptions& options);

}  // namespace quantkit
