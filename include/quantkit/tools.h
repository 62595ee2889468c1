// quantkit's public inspection and conversion tools: the library behind `quantkit inspect |
// lint | tensor-calib | cache | data`. Each returns what the CLI prints (`text`, and `json` where
// the CLI has --json) and the typed verdict its exit code comes from.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quantkit/data_source.h"
#include "quantkit/status.h"

namespace quantkit {

// inspect: versions, producer, inputs/outputs with dtypes and symbolic shapes, op histogram,
// weights and where they live.
struct ModelInspection {
  std::string text, json;
};
Result<ModelInspection> InspectModel(const std::string& path);

// lint: TensorRT explicit-quantization checks on a Q/DQ model.
struct LintReport {
  int errors = 0, warnings = 0, notes = 0;  // errors: TensorRT will reject the model
  std::string text, json;
};
Result<LintReport> LintModel(const std::string& path);

// tensor-calib: the amax each calibration method gives one tensor (.npy), on the
// pytorch-quantization reference histogram.
struct TensorCalibOptions {
  std::string file;
  std::vector<std::string> methods = {"all"};  // method names or "all"
  int64_t bins = 2048;
};
struct TensorMethodAmax {
  std::string method;  // label, e.g. "percentile(99.99)"
  float amax = 0;
};
struct TensorCalibReport {
  std::vector<TensorMethodAmax> methods;
  std::string text, json;
};
Result<TensorCalibReport> TensorCalib(const TensorCalibOptions& options);

// cache inspect | diff | check: TensorRT calibration caches. `problems` > 0 when inspect found
// unusable scales, diff found differences, check found the cache unfit.
struct CacheToolReport {
  int problems = 0;
  std::string text;
};
Result<CacheToolReport> InspectCache(const std::string& path, bool json = false);
Result<CacheToolReport> DiffCaches(const std::string& a, const std::string& b, double rtol = 1e-6);
// `trt_version` / `calibrator` empty: not checked.
Result<CacheToolReport> CheckCache(const std::string& path, const std::string& model,
                                   const std::string& trt_version = "",
                                   const std::string& calibrator = "");

// data: the samples a data spec gives a model, after the declared preprocessing, written as
// OUT/<input>.npy and OUT/labels.npy.
struct DumpDataOptions {
  std::string model, data, output_dir;
  ImagePreprocessing image;
  int64_t samples = 16;  // the first N (0: all; all are held in memory)
};
struct DumpDataReport {
  std::string text;  // "<data> -> <output_dir>"
};
Result<DumpDataReport> DumpData(const DumpDataOptions& options);

}  // namespace quantkit
