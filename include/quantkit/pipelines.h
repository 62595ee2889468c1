// quantkit's public workflow entry points beside calibration (quantkit/calibration.h): the
// library behind `quantkit eval | analyze | fallback | diagnose | convert | run` (and
// quantkit/qat.h, quantkit/tools.h for qat and the inspection tools). Each takes an options struct
// of plain values holding every option of its subcommand and returns a report: the key numbers
// typed, plus `text` (exactly what the CLI prints) and `json` (the machine-readable report,
// stable field names, what the CLI prints with --json).
//
// Workflows that run a model take DistributedOptions (quantkit/options.h): under torchrun, srun
// or a PyTorchJob each rank works on its shard and only rank 0's report holds the results; every
// report's `rank` has this process's summary line.
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
#include "quantkit/options.h"
#include "quantkit/qat.h"
#include "quantkit/status.h"
#include "quantkit/tools.h"

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
  int64_t samples = 0, batch_size = 64;
  ImagePreprocessing image;
  bool progress = false;  // a bar on stderr when it is a terminal
  // Extra metrics against the reference (top1, agreement, rel_mse): need `reference_model` or
  // `plan`.
  std::vector<std::string> metrics;
  // Written by rank 0 when set: the argmax per sample (int64 [N]) and the first output
  // (float32 [N, width]) as .npy.
  std::string save_predictions, save_outputs;
  DistributedOptions distributed;
};
struct EvaluateReport {
  int64_t samples = 0;
  std::optional<double> top1, top5;
  // With a reference: over the first outputs flattened (analysis/metrics: cosine is 1 when both
  // are all zero, SQNR +inf when they are equal).
  std::optional<double> argmax_agreement, cosine, sqnr_db, max_abs_error;
  std::map<std::string, double> metrics;  // every metric computed, by name
  double seconds = 0;
  double model_seconds = 0, reference_seconds = 0;  // inside each model's runs (this rank)
  std::vector<std::string> written;                 // save_predictions, save_outputs
  std::string text, json;
  RankSummary rank;
};
Result<EvaluateReport> Evaluate(const EvaluateOptions& options);

// The plan-vs-FP32 workflows share these: the FP32 model, a plan (a file of any format, or one
// in memory), the data.
struct PlanEvaluationOptions {
  std::string model, plan, data;
  Plan loaded_plan;  // used instead of the file `plan` when valid()
  std::string placement = "auto";
  int64_t samples = 256, batch_size = 64;
  std::vector<std::string> metrics;  // top1, agreement, rel_mse; empty: top1 with labels, agreement
  // Each rank evaluates its shard; every rank takes the same decisions, rank 0 writes.
  DistributedOptions distributed;
};

// analyze: per quantized tensor, the error it causes alone and accumulated, ranked worst first.
struct AnalyzeOptions {
  PlanEvaluationOptions evaluation;
  bool accumulated = true;  // the accumulated (prefix) runs: half the time
  bool progress = false;    // a bar on stderr when it is a terminal
  int64_t top = 0;          // rows of `text` (0: all; the CLI shows 20); `json` has every row
};
struct AnalyzeReport {
  std::vector<std::string> ranked_tensors;  // worst first
  std::vector<std::string> warnings;        // e.g. plan tensors matching no model tensor
  std::string text, json;
  RankSummary rank;
};
Result<AnalyzeReport> Analyze(const AnalyzeOptions& options);

// fallback: the smallest set of layers to keep in float so INT8 comes within `budget` of FP32.
struct FallbackOptions {
  PlanEvaluationOptions evaluation;  // at most one metric: the one the search optimizes
  double budget = 0.5;               // top1/agreement in points (0.5 = 0.5%), rel_mse as a ratio
  int max_float_layers = 0;          // 0: no limit
  std::string output_dir;  // plan.json, model.qdq.onnx, layer_precisions.txt, fallback.json
  std::string float_precision = "fp16";  // named in --layerPrecisions for the float layers
  // Memory for cached activations trials start from (0: every trial runs the whole model; the
  // results are the same).
  int64_t trial_cache_bytes = int64_t{512} << 20;
  bool progress = false;      // a bar on stderr when it is a terminal
  FloatOutputOptions floats;  // of the written model; an empty dtype keeps the plan's
};
struct FallbackReport {
  Plan plan;  // with float_nodes
  std::vector<std::string> float_layers;
  double fp32_value = 0, int8_value = 0, final_value = 0;
  bool within_budget = false;
  std::string layer_precisions;  // trtexec --layerPrecisions value
  std::vector<std::string> written, warnings;
  std::string text, json;
  RankSummary rank;
};
Result<FallbackReport> Fallback(const FallbackOptions& options);

// diagnose: is the calibration data enough, stable, like the reference data, preprocessed as
// the model expects, batch-independent? (docs/diagnose.md)
struct DiagnoseOptions {
  std::string model, data, reference_data;
  int64_t samples = 0, reference_samples = 0, batch_size = 32;
  std::string method = "max";  // the method calibrate will use
  std::string output_dir;      // report.txt, report.json, SVG pictures
  bool progress = false;       // a bar on stderr when it is a terminal
  int chunks = 16;             // collector sets kept (resolution of curves and bootstrap), [1, 256]
  int bootstrap = 64;          // bootstrap resamples of the chunks
  int subsets = 16;            // random half-subsets for the stability CV
  uint64_t seed = 1;           // of the resampling
  double ci_tolerance = 0.05;  // wanted 95% interval half-width of each scale (relative)
  double cv_tolerance = 0.05;  // coefficient of variation above which a scale is unstable
  int64_t batch_check_samples = 16;  // samples run at batch 1 and batch B (0: skip the check)
  // The declared model-input expectation: "range=LO:HI" and/or "mean=M[/M..],std=S[/S..]".
  std::string expect;
  Placement placement;  // excluded nodes / op types, as calibrate
  DistributedOptions distributed;
};
struct DiagnoseReport {
  bool clean = false;   // no error or warning finding
  bool enough = false;  // enough samples for stable scales
  int64_t suggested_samples = 0;
  std::vector<std::string> findings;  // "severity: message"
  std::vector<std::string> written;
  std::string text, json;
  RankSummary rank;
};
Result<DiagnoseReport> Diagnose(const DiagnoseOptions& options);

// convert: between every pair of plan formats through the QuantPlan hub (docs in the README):
// Q/DQ or QOperator ONNX, TensorRT cache, plan JSON, ranges text; plan + `model` -> Q/DQ ONNX.
struct ConvertOptions {
  std::string input, output;
  std::string model;                   // float model, for plan -> Q/DQ ONNX
  std::string placement = "tensorrt";  // "tensorrt" | "plan" (where the source quantized)
  bool qdq_output = false;             // ONNX -> ONNX: write the TensorRT Q/DQ model
  std::string trt_version = "8.6.1";
  std::string calibrator = "EntropyCalibration2";  // cache header: or MinMaxCalibration
  std::string float_precision = "fp16";            // fp16 | fp32: named in layer_precisions
  bool layer_precisions = false;  // `text` ends with the trtexec --layerPrecisions options
  FloatOutputOptions floats;      // of a written Q/DQ model; an empty dtype keeps the plan's
  // A written Q/DQ model: data to check the float dtype's ranges on first, and to report the
  // model's accuracy against `model` on afterwards (the migration check to TensorRT 11).
  std::string data;
  ImagePreprocessing image;
  int64_t samples = 0, batch_size = 32;
};
struct ConvertReport {
  std::vector<std::string> written, messages;
  std::string layer_precisions;
  std::string text, json;
};
Result<ConvertReport> Convert(const ConvertOptions& options);

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
  std::string text;  // the summary lines
};
Result<RunReport> Run(const RunOptions& options);

}  // namespace quantkit
