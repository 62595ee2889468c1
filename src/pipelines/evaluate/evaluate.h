// `quantkit eval`: runs a model over a data source with quantkit's interpreter and reports
// classification accuracy (top-1/top-5 against the source's labels) and, with a reference model
// (e.g. the FP32 model beside its Q/DQ twin), how closely the outputs agree: argmax agreement,
// cosine similarity, SQNR and max |error| of the first output.
//
// A Q/DQ model runs as written: its QuantizeLinear/DequantizeLinear nodes perform symmetric int8
// fake quantization (round half to even, saturation), i.e. INT8 simulation. With a plan
// (--plan plan.json | cache | ranges | Q/DQ .onnx) the float model runs with that plan's Q/DQ
// (analysis/simulate.h) and is compared with itself in FP32 unless --reference says otherwise.
// Every figure is an analysis metric (analysis/metrics.h: Top1Metric, Top5Metric,
// AgreementMetric, OutputErrorMetric), the caller's extra metrics beside them: each sees every
// batch of outputs, FP32 reference and labels, and its per-batch state is added in sample order,
// so the figures do not depend on batching or on how many processes ran.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "analysis/simulate.h"
#include "data/image_options.h"
#include "distributed/launch.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct EvalOptions {
  std::string model;
  std::string data;
  data::ImageOptions image;     // preprocessing declared for an image-folder --data
  std::string reference_model;  // optional: compare outputs against this model
  std::string plan;             // optional: simulate this plan on `model` (the FP32 model)
  std::optional<quant::QuantPlan> loaded_plan;  // a plan in memory, simulated instead of `plan`
  analysis::SimulationOptions simulation;
  std::vector<analysis::Metric*>
      metrics;  // not owned; need a reference (the FP32 model with a plan)
  int64_t first_sample =
      0;  // skip the data's first N samples (qat's held-out tail of its training data)
  int64_t samples = 0;
  int64_t batch_size = 64;
  bool progress = true;
  bool keep_outputs = false;  // fill EvalResult::outputs (the first output, flattened per sample)
  // Written by rank 0 (or the only process) when set: argmax per sample (int64 [N]) and the first
  // output (float32 [N, width]) as .npy.
  std::string save_predictions, save_outputs;
  // Under torchrun/srun/a PyTorchJob each rank evaluates its shard; counts are summed exactly and
  // float sums added per batch in sample order on rank 0, so its report equals one process's.
  distributed::DistributedOptions distributed;
  // One process whatever the environment says (a check run by rank 0 alone inside a launch, e.g.
  // qat's check of the model it exported): no launch is joined.
  bool single_process = false;

  bool simulates() const { return loaded_plan.has_value() || !plan.empty(); }
};

struct Agreement {
  double argmax_agreement = 0;  // share of samples with the same argmax
  double cosine = 0;            // over all outputs, flattened
  double sqnr_db = 0;           // 10 log10(|ref|^2 / |out - ref|^2)
  double max_abs_error = 0;
};

struct EvalResult {
  int64_t samples = 0;
  std::optional<double> top1, top5;  // when the data has labels
  std::optional<Agreement> agreement;
  std::map<std::string, double> metrics;  // by analysis::Metric::name()
  std::vector<int64_t> predictions;       // argmax per sample
  std::vector<float> outputs;             // [samples, output_width] when keep_outputs
  int64_t output_width = 0;
  double seconds = 0;
  // Seconds inside the model's runs and the reference's (this rank). With --plan: the simulated
  // INT8 pass and the FP32 pass, run batch after batch in one process, so their ratio holds on a
  // loaded machine (docs/performance.md). With a reference and more than one run, both leave out
  // the first run, which pays one-time kernel generation for whichever model ran first.
  double model_seconds = 0, reference_seconds = 0;
  std::vector<std::string> written;   // files saved (rank 0)
  std::vector<std::string> warnings;  // plan entries that could not be used, simulated in float
  distributed::RankReport rank;       // this process's part; only rank 0 holds the totals
};

Result<EvalResult> Evaluate(const EvalOptions& options);
std::string FormatEval(const EvalOptions& options, const EvalResult& result);

}  // namespace quantkit::pipelines
