// Model-input statistics for `quantkit diagnose` and the preprocessing checks built on them:
// value scale (0-1, 0-255, normalized), per-channel mean/std, constant/duplicated samples, random
// data (no spatial correlation), NHWC data reinterpreted as NCHW, and comparisons between the
// calibration set, a reference set and a declared expectation (scale, shift, channel order).
// Everything is computed from the batches as the data source delivers them — no model run.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/byte_io.h"
#include "ir/tensor.h"
#include "pipelines/diagnose/stats.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct InputStats {
  std::string input;
  int64_t samples = 0;
  std::vector<int64_t> sample_dims;  // without the batch dimension
  int64_t channel_axis = -1;         // in sample_dims; -1: single channel
  double mean = 0, std = 0, min = 0, max = 0;
  std::vector<double> channel_mean, channel_std;
  // Medians over the non-constant samples: Pearson correlation of horizontally adjacent values,
  // excess kurtosis of the sample's values, mean |x[w] - x[w+1]| and |x[w] - x[w+C]|.
  double lag1_corr = 0, kurtosis = 0, lag1_absdiff = 0, lagc_absdiff = 0;
  int64_t constant_samples = 0, duplicate_samples = 0;
  std::vector<double> sample_mean, sample_std;  // one per sample (outlier detection)
  std::string scale;  // "0-1", "0-255", "normalized", "other" ("" for an expectation)
};

// Accumulates one input's statistics batch by batch. Every number is kept per sample (its
// per-channel sums, mean, std, hash, ...) and combined in Finalize() in sample order, so the
// result depends only on the sequence of samples: not on the batch size, and not on which
// process added them — the ranks of a distributed run each accumulate their shard, and rank 0
// appends their states in rank order (Append) and finalizes to one process's numbers bit for bit.
class InputStatsAccumulator {
 public:
  explicit InputStatsAccumulator(std::string input) : input_(std::move(input)) {}
  const std::string& input() const { return input_; }
  // A float32 batch [B, ...] of this input (other dtypes are ignored: ids, masks).
  Status Add(const ir::Tensor& batch);
  // Adds the batches of `later` (samples that come after this accumulator's) in their order.
  Status Append(InputStatsAccumulator&& later);
  InputStats Finalize() const;

  // The state as bytes (common/byte_io.h) for the ranks of one run, and back; Decode validates
  // sizes and names `source` in its errors.
  void Encode(ByteWriter* out) const;
  static Result<InputStatsAccumulator> Decode(ByteReader* in);

 private:
  // One batch of samples of one shape. Samples of other shapes than the first batch's (text
  // lines of other widths) run in their own batches and are left out by Finalize().
  struct Batch {
    std::vector<int64_t> sample_dims;
    int64_t channel_axis = -1;
    int64_t per_channel_count = 0;         // values per channel per sample
    std::vector<double> ch_sum, ch_sumsq;  // per sample and channel (sample-major)
    double min = 0, max = 0;
    std::vector<double> sample_mean, sample_std;  // per sample
    std::vector<uint64_t> sample_hash;            // per sample (duplicates)
    int64_t constant_samples = 0;
    // Per non-constant sample (medians in Finalize); the lag ones only for spatial samples.
    std::vector<double> kurtosis, lag1_corr, lag1_absdiff, lagc_absdiff;
  };
  std::string input_;
  std::vector<Batch> batches_;
};

// --expect: "range=LO:HI", "mean=M[/M2/M3],std=S[/S2/S3]" (per channel), or both, comma-separated.
// mean/std are those of the tensor the model receives (after any normalization).
struct InputExpectation {
  bool has_range = false;
  double lo = 0, hi = 0;
  std::vector<double> mean, std;
  bool empty() const { return !has_range && mean.empty() && std.empty(); }
};
Result<InputExpectation> ParseExpectation(const std::string& text);

// "0-1", "0-255", "normalized" or "other" from a set's range and moments.
std::string ClassifyScale(double min, double max, double mean, double std);

// Findings about one set on its own (constant/duplicated samples, random data, swapped layout).
void CheckInputSet(const InputStats& s, const std::string& set_label, std::vector<Finding>* out);
// Findings comparing `data` (e.g. calibration) with `ref` (reference data or an expectation):
// scale, normalization, shift and channel order.
void CompareInputSets(const InputStats& data, const std::string& data_label, const InputStats& ref,
                      const std::string& ref_label, std::vector<Finding>* out);
void CheckExpectation(const InputStats& data, const std::string& data_label,
                      const InputExpectation& expect, std::vector<Finding>* out);

}  // namespace quantkit::pipelines
