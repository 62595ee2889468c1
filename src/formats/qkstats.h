// .qkstats: calibration statistics of a model, enough to recompute every calibration method
// later without the data. Key-sorted JSON, versioned and self-describing (docs/histogram-policy.md
// "The .qkstats file"):
//
//   {"format": "quantkit.qkstats", "version": 1, "model_sha256": "<64 hex>",
//    "histogram": {"log2_bins": 14, "policy": "pow2-abs-v1"},
//    "tensors": {"<name>": {
//        "range": {"count", "nan", "posinf", "neginf", "zeros", "min", "max", "amax"},
//        "histogram": {"range_exp": int|null, "positive": [[bin, count], ...],
//                      "negative": [[bin, count], ...], "zeros", "nonfinite"},
//        "per_channel": {"axis", "amax": [...], "nonfinite"}        (weights only)}}}
//
// Floats are written as JSON numbers that round-trip exactly (non-finite as "inf"/"-inf"/"nan");
// histogram bins are sparse (only non-zero bins). Readers reject other formats, versions, model
// hashes, unknown keys and inconsistent values with a one-line error naming the file. Merging
// several files gives exactly the statistics of one pass over all their data.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "quant/collectors/tensor_collector.h"
#include "quantkit/status.h"

namespace quantkit::formats {

inline constexpr int kQkStatsVersion = 1;
inline constexpr char kQkStatsFormat[] = "quantkit.qkstats";
inline constexpr char kQkStatsHistogramPolicy[] = "pow2-abs-v1";

struct StatsFile {
  std::string model_sha256;  // lowercase hex SHA-256 of the model, given by the caller
  int histogram_log2_bins = quant::kDefaultStreamLog2Bins;
  std::map<std::string, quant::TensorCollector> tensors;  // sorted by name
};

std::string SerializeStats(const StatsFile& stats);
// `source` names the file in errors. expected_model_sha256 empty = accept any model.
Result<StatsFile> ParseStats(const std::string& text, const std::string& source,
                             const std::string& expected_model_sha256 = "");

// Atomic: writes <path>.tmp.<pid>, then renames over path.
Status WriteStatsFile(const std::string& path, const StatsFile& stats);
Result<StatsFile> ReadStatsFile(const std::string& path,
                                const std::string& expected_model_sha256 = "");

// Adds `other` into `*into` (same model, same histogram resolution); tensors are unioned.
Status MergeStats(StatsFile* into, const StatsFile& other);
// Reads and merges files (all must describe the same model; the first file's hash is used when
// expected_model_sha256 is empty).
Result<StatsFile> MergeStatsFiles(const std::vector<std::string>& paths,
                                  const std::string& expected_model_sha256 = "");

}  // namespace quantkit::formats
