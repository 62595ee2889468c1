// `quantkit diagnose`: is the calibration data enough, stable, representative and preprocessed
// the way the model expects — before a bad engine is built from it.
//
// One pass over the calibration data keeps one TensorCollector set per chunk of k samples. The
// collectors merge exactly, so without re-running the model:
//   sufficiency   prefix merges give each tensor's amax against N (convergence curves) and a
//                 bootstrap over chunks (with replacement, fixed seed) a 95% interval of its amax;
//   stability     amax over random half-subsets of the chunks: coefficient of variation per method.
// A second short run compares batch 1 with batch B (batch-composition dependence), a graph check
// flags ops that mix samples (BatchNormalization training_mode=1, reductions over axis 0); an
// optional reference set is run once for representativeness (clipping share, JS divergence);
// the model inputs of both sets are compared with each other and with a declared expectation.
// docs/diagnose.md documents every finding code and threshold.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/shard.h"
#include "distributed/launch.h"
#include "passes/qdq_placement.h"
#include "pipelines/diagnose/inputs.h"
#include "pipelines/diagnose/stats.h"
#include "quant/collectors/range.h"
#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit {
class ArtifactSet;
}  // namespace quantkit

namespace quantkit::pipelines {

// Bounds of the resampling options: memory and time grow with them (--bootstrap 1000000000 took
// 10 GB and was killed; every resample is a pass over the chunks of every tensor).
inline constexpr int kMaxChunks = 256;
inline constexpr int kMaxResamples = 100000;

struct DiagnoseOptions {
  std::string model;
  std::string data;            // calibration data (data::OpenSource spec)
  std::string reference_data;  // optional validation / production data
  int64_t samples = 0;         // 0: all
  int64_t reference_samples = 0;
  int64_t batch_size = 32;
  quant::MethodRequest method;  // the method calibrate will use (default max, as calibrate)
  int chunks = 16;     // collector sets kept (more: finer curves, more memory), <= kMaxChunks
  int bootstrap = 64;  // bootstrap resamples of the chunks, <= kMaxResamples
  int subsets = 16;    // random half-subsets for the stability CV, <= kMaxResamples
  uint64_t seed = 1;
  double ci_tolerance = 0.05;        // the verdict's X: 95% interval half-width / amax
  double cv_tolerance = 0.05;        // coefficient of variation above which a scale is unstable
  int64_t batch_check_samples = 16;  // samples run at batch 1 and batch B; 0: skip the run
  InputExpectation expect;
  passes::PlacementOptions placement;
  std::string output_dir;  // SVG pictures + report.json + report.txt; empty: none
  bool progress = true;
  // Under torchrun/srun/a PyTorchJob (docs/distributed.md): each rank runs its shard of the data;
  // rank 0 gets every rank's statistics, analyses them and alone writes -o, and its report is one
  // process's report (timing aside).
  distributed::DistributedOptions distributed;
};

struct TensorDiagnosis {
  std::string name;
  quant::RangeStats range;
  float amax = 0;  // chosen method, all samples
  std::map<quant::MethodRequest, float>
      method_amax;  // every method (quant::AllMethods) + the chosen one
  std::vector<std::pair<int64_t, float>> convergence;  // (samples, amax) per prefix of chunks
  float ci_low = 0, ci_high = 0;                       // bootstrap 95% interval of amax
  double ci_rel = 0;                                   // (ci_high - ci_low) / 2 / amax
  std::map<quant::MethodRequest, double> cv;           // per method: CV over half-subsets
  int64_t channels = 0, dead_channels = 0;             // per-channel (axis 1) of rank-4 tensors
  double outlier_ratio = 1;                            // max / percentile-99.99 amax
  double entropy_clip_share = 0;  // share of |x| beyond the entropy amax (0 unless
                                  // entropy amax < 0.8 max)
  double clip_share = 0;          // calibration values beyond amax
  double ref_clip_share = -1;     // reference values beyond amax (-1: no reference)
  double ref_js_bits = -1;        // JS divergence calibration vs reference
  float ref_amax = 0;
  std::string recommended_method;
  std::string recommendation;     // why
  std::vector<int64_t> abs_hist;  // 128 bins of |x| over [0, range.amax] (pictures)
};

struct SampleOutlier {
  int64_t index = 0;
  std::string input;
  double z_mean = 0, z_std = 0;
};

struct BatchCheck {
  std::vector<std::string> graph_reasons;  // nodes that mix samples
  bool measured = false;
  int64_t samples = 0, batch = 0;
  double max_rel_amax_diff = 0;  // over watched tensors, batch 1 vs batch B
  std::string worst_tensor;
  double max_output_diff = 0;  // max |out_1 - out_B| / (max |out_B| + tiny)
};

struct DiagnoseResult {
  std::string model, data, reference, method;  // method: the chosen method's label
  quant::MethodRequest chosen;
  int64_t samples = 0, chunk_size = 0, reference_samples = 0;
  std::vector<TensorDiagnosis> tensors;  // every quantized activation, sorted by name
  std::vector<InputStats> inputs, reference_inputs;
  bool enough = false;
  double worst_ci_rel = 0;
  int64_t suggested_samples = 0;
  std::vector<std::string> moving, unstable;  // tensor names
  std::vector<SampleOutlier> outliers, reference_outliers;
  BatchCheck batch;
  std::vector<Finding> findings;
  bool clean = false;   // no error/warning finding
  std::string summary;  // the text report
  std::vector<std::string> written;
  double seconds = 0;
  // This process's part of a distributed run (rank 0 of 1 otherwise; not in the reports): its
  // calibration samples, its passes over its shards (work), gathering (merge) and the report
  // files (write, rank 0). On the ranks other than 0 only this, model, data and samples are filled.
  distributed::RankReport rank;
};

// One process, or the ranks of a launch (options.distributed): every rank calls it.
Result<DiagnoseResult> Diagnose(const DiagnoseOptions& options);

// The JSON report (stable field names; docs/diagnose.md).
std::string DiagnoseJson(const DiagnoseResult& r);
// The readable text report.
std::string DiagnoseText(const DiagnoseResult& r);
// Stages convergence.svg and hist_<tensor>.svg files in `out` (committed with the reports);
// returns their final paths.
Result<std::vector<std::string>> WriteDiagnoseSvgs(const DiagnoseResult& r, ArtifactSet& out);

}  // namespace quantkit::pipelines
