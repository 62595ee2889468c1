// PTQ stages: accuracy beyond the range choice, label-free (`calibrate --ptq STAGE[,STAGE...]`).
//
// A stage runs after BuildPlan, in the order given, and edits the plan: scales (plan.tensors) and,
// where it changes weights, plan.initializers (quant/plan.h), which passes::ApplyPlan writes into
// the model before it places Q/DQ. So every writer and every measurement uses what the stages
// chose: model.qdq.onnx, the simulation (eval, --method auto, --budget), the float model calibrate
// writes for the TensorRT cache (model.float.onnx: the original with the stages' weights;
// calib.cache and ranges.txt apply to it; it is also QAT's start point: `qat model.float.onnx
// --plan plan.json`). Each stage appends itself and its parameters to plan.provenance.stages.
//
//   --ptq NAME[:KEY=VALUE[:KEY=VALUE...]][,NAME...]      e.g. --ptq seqmse:candidates=20,adaround
//
// Stages (PtqStages() lists them with their parameters, defaults and ranges):
//   smoothquant  per input channel, a scale s moved from each activation into the weights that read
//              it (X / s folded into X's producer, diag(s) W; Xiao et al. 2023, onnxruntime's and
//              ModelOpt's SmoothQuant), alpha given or chosen on held-out data; the plan is then
//              calibrated again on the smoothed model. Must come first (passes/smoothquant.h).
//   seqmse     per-layer weight-range search: for each output channel the clip (a fraction k/K of
//              max|w|) whose quantized weights minimise the layer's output error (aimet's
//              apply_seq_mse)
//   adaround   learned up/down rounding of each weight, reconstructing each layer block's FP32
//   output
//              (Nagel et al. 2020; aimet's apply_adaround). Must come after seqmse when both run.
//   bias-correction  per output channel, the mean shift of the quantized layer's output against
//              the FP32 layer's on the same samples added to its bias (Nagel et al. 2019,
//              empirical; aimet's bias correction). Layers with a float bias of one value per
//              output channel (Conv, ConvTranspose, Gemm with beta = 1). Last: after seqmse and
//              adaround.
// seqmse, adaround and bias-correction walk the weighted layers in topological order with the
// quantized prefix (analysis/layer_cache.h): each layer sees the inputs the layers before it, as
// already changed, give.
//
// Data: the first `samples` samples of the calibration data (fewer when their cached activations
// would exceed `memory_bytes`: the summary says so), read in run batches of `batch` samples.
// Deterministic: the samples are the first N, every random draw comes from `seed`.
// Device: the layer runs and the optimisation use runtime::DefaultDevice() (--device).
// Distributed: the stages run on rank 0 once the statistics are merged (they read the first N
// samples themselves); the other ranks wait for its outcome.
//
// Adding a stage: a PtqStageKind, a row of PtqStages() with its
// parameters, a Run function beside ptq_adaround.cc, and its case in RunPtqStages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/image_options.h"
#include "pipelines/calibration_steps.h"
#include "quant/plan.h"
#include "quantkit/calibration.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

enum class PtqStageKind { kSmoothQuant, kSeqMse, kAdaRound, kBiasCorrection };

struct PtqParam {
  const char* name;
  double default_value, min, max;  // inclusive range, checked when parsed
  bool integer;
  const char* help;
};

struct PtqStageInfo {
  PtqStageKind kind;
  const char* name;  // as the CLI spells it
  const char* help;
  std::vector<PtqParam> params;
};

// Every stage, in the order `--help` lists them.
const std::vector<PtqStageInfo>& PtqStages();
const PtqStageInfo& PtqStageInfoFor(PtqStageKind kind);

struct PtqStageSpec {
  PtqStageKind kind = PtqStageKind::kAdaRound;
  std::map<std::string, double> params;  // every parameter of the stage, defaults filled in

  double Get(const std::string& name) const;
  // "adaround(iterations=2000,reg=0.01,...)": the provenance entry (every parameter).
  std::string Label() const;
};

// "seqmse,adaround:iterations=500". Unknown stage or parameter names, values that are not numbers,
// out of range or not integers where integers are needed, duplicate stages and an order the stages
// cannot run in (adaround before seqmse) are kInvalidArgument naming the stage and the value.
Result<std::vector<PtqStageSpec>> ParsePtqStages(const std::string& text);
// The stage list as a user would type it.
std::string PtqStagesText(const std::vector<PtqStageSpec>& stages);

// Cached activations are bounded by this (PtqOptions::memory_bytes) unless told otherwise.
// The defaults are the public API's (quantkit/calibration.h).
using quantkit::kDefaultPtqBatch;
using quantkit::kDefaultPtqSamples;
inline constexpr int64_t kDefaultPtqMemoryBytes = quantkit::kDefaultPtqMemoryMib << 20;

struct PtqOptions {
  std::vector<PtqStageSpec> stages;  // empty: none
  int64_t samples =
      kDefaultPtqSamples;  // the first N calibration samples (fewer if memory_bytes says so)
  int64_t batch = kDefaultPtqBatch;  // samples per cached run batch (and per AdaRound iteration)
  int64_t memory_bytes = kDefaultPtqMemoryBytes;  // bound on the cached activations
  uint64_t seed = 0;
  bool progress = true;
};

// Range checks of the numbers above (the stage parameters are checked when parsed).
Status CheckPtqOptions(const PtqOptions& options);

struct PtqStageReport {
  std::string stage;  // the Label()
  int layers = 0;     // layers the stage changed or examined
  int unchanged = 0;  // layers it left as they were (nothing better found)
  double loss_before = 0,
         loss_after = 0;  // summed layer output errors, as each stage measures them
  double seconds = 0;
  std::vector<std::string> lines;  // per layer, for --verbose readers and tests
  std::vector<std::string>
      notes;  // for the summary, under the stage's line (smoothquant's alpha trials)
  std::string
      summary;  // the stage's own summary line, where the generic one does not fit (smoothquant)
};

struct PtqReport {
  std::vector<PtqStageReport> stages;
  std::vector<std::string> notes;  // samples used, layers skipped and why, memory
  int64_t samples = 0;
  int64_t cache_peak_bytes = 0;
  double seconds = 0;
};

// The data the stages read: calibrate's --data spec, preprocessing and the samples it may use
// (0: all; calibrate --method auto passes the calibration part, the held-out tail excluded).
struct PtqData {
  std::string spec;
  data::ImageOptions image;
  int64_t limit = 0;
  // The methods the plan was built with: smoothquant calibrates the smoothed model again with them.
  MethodChoice methods;
};

// Runs options.stages in order on `plan` (built for `model` and `sites`).
Result<PtqReport> RunPtqStages(const LoadedModel& model, const CalibrationSites& sites,
                               const PtqData& data, const PtqOptions& options,
                               quant::QuantPlan* plan);

// The report's summary lines ("ptq: ..."), for calibrate's summary.
std::vector<std::string> FormatPtqReport(const PtqReport& report);

}  // namespace quantkit::pipelines
