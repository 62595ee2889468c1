// Runs ONNX backend-style test cases (dir/model.onnx + dir/test_data_set_N/{input,output}_K.pb)
// through onnx_io::ImportModel and runtime::Interpreter and compares the outputs; and, in the
// spirit of ggml's test-backend-ops, runs every case again on each other device given and
// compares that with the CPU (device parity, docs/gpu.md).
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "runtime/device.h"

namespace quantkit::testing {

struct SkipRule {
  std::string category;
  std::string pattern;
  std::regex regex;
  std::string reason;
};

// Reads a skips.jsonc file: {"category": {"regex": "reason", ...}, ...} with // comments.
bool LoadSkips(const std::string& path, std::vector<SkipRule>* rules, std::string* error);

struct SuiteOptions {
  double rtol = 1e-3;
  double atol = 1e-7;
  std::string filter;    // only cases whose name contains this (QK_CONFORMANCE_FILTER)
  bool verbose = false;  // print every failure's reason (QK_CONFORMANCE_VERBOSE=1)
  std::vector<runtime::Device> devices;  // compared with the CPU, case by case (not the CPU)
};

// One device against the CPU over a suite: a case is "equal" when every output has the CPU's
// dtype, shape and bytes; "within tolerance" when the float outputs differ within
// kDeviceParityRtol / kDeviceParityScaleAtol (integer, bool and shape outputs must be equal);
// "failing" otherwise, or when the device run fails where the CPU's succeeds, or when a kernel
// met host and device tensors (the interpreter's mixed-device retry, runtime/device.h).
struct DeviceParity {
  std::string device;
  int equal = 0, within = 0, failing = 0;
  std::vector<std::string> failures;  // "case: reason"
  // "932 node cases on cuda:0: N equal, M within tolerance, 0 failing" (what = "node cases";
  // the cases the CPU ran, whether or not it agreed with the reference).
  std::string Summary(const std::string& what) const;
};

struct SuiteResult {
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;  // "case: reason"
  std::vector<DeviceParity> parity;   // one per SuiteOptions::devices
};

enum class Parity { kEqual, kWithin, kFailing };
// `device` against `cpu` (one output); `why` says how they differ unless kEqual.
Parity CompareWithCpu(const ir::Tensor& cpu, const ir::Tensor& device, std::string* why);

// Every subdirectory of `root` holding a model.onnx is a case.
SuiteResult RunSuite(const std::string& root, const std::vector<SkipRule>& skips,
                     const SuiteOptions& options);

}  // namespace quantkit::testing
