// TensorRT INT8 calibration cache ("calibration table"), calibration-spec §1:
//
//     TRT-<version>-<algorithm>
//     <tensor name>: <hex of the float32 bits of the scale, %08x>
//
// scale = float32(amax) / 127.0f. <version> is NV_TENSORRT_VERSION of the TensorRT that reads
// the cache: major*1000 + minor*100 + patch up to TensorRT 9 (8.6.1 -> 8601), and
// major*10000 + minor*100 + patch from TensorRT 10 (10.3.0 -> 100300). TensorRT silently
// recalibrates (or fails without data) when the header does not match its version and
// calibrator, so the version is the user's choice; kDefaultTrtVersion documents ours.
// Readers split each line on the LAST ": " because tensor names may contain ':' (`input_1:0`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::formats {

// TensorRT 8.6.1: the last TensorRT 8 release, the version JetPack 5/6 DLA users most often
// build with and the newest whose caches qdq-translator targets by default (8600).
inline constexpr const char* kDefaultTrtVersion = "8.6.1";

struct TrtVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  // NV_TENSORRT_VERSION as written in cache headers.
  int64_t HeaderNumber() const;
  std::string ToString() const;  // "8.6.1"
};

// Parses "8.6.1", "10.3", "10.3.0". Rejects anything else with a message.
Result<TrtVersion> ParseTrtVersion(const std::string& text);
// Inverse of HeaderNumber: 8601 -> 8.6.1, 100300 -> 10.3.0.
TrtVersion TrtVersionFromHeaderNumber(int64_t number);

enum class TrtCalibrator { kEntropy2, kMinMax };
const char* TrtCalibratorName(TrtCalibrator c);  // "EntropyCalibration2", "MinMaxCalibration"
Result<TrtCalibrator> ParseTrtCalibrator(const std::string& name);

struct TrtCache {
  int64_t version_number = 0;  // as in the header, e.g. 8601
  std::string algorithm;       // as in the header, e.g. "EntropyCalibration2"
  std::vector<std::pair<std::string, float>> scales;  // in file order
};

struct TrtCacheWriteOptions {
  TrtVersion version = TrtVersion{8, 6, 1};
  TrtCalibrator calibrator = TrtCalibrator::kEntropy2;
};

// Bits of the float32 scale as 8 lowercase hex digits (zero-padded: strict readers need an even
// digit count).
std::string EncodeScaleHex(float scale);
// Parses 1-8 hex digits (TensorRT itself writes %x, unpadded) into the float32 they encode.
Result<float> DecodeScaleHex(const std::string& hex);

// Cache text for the plan's quantized per-tensor activation entries (per-channel weight scales
// are not part of implicit-quantization caches: TensorRT computes them).
std::string FormatTrtCache(const quant::QuantPlan& plan, const TrtCacheWriteOptions& options);
// A tensor listed twice is an error naming both lines (TensorRT would keep one silently).
Result<TrtCache> ParseTrtCache(const std::string& text, const std::string& source_name);
// Scales become per-tensor activation entries with source "cache"; an unusable scale
// (ScaleProblem) becomes a not-quantized entry saying why.
quant::QuantPlan PlanFromTrtCache(const TrtCache& cache);

Status WriteTrtCache(const std::string& path, const quant::QuantPlan& plan,
                     const TrtCacheWriteOptions& options);
Result<TrtCache> ReadTrtCache(const std::string& path);

}  // namespace quantkit::formats
