// Runs ONNX backend-style test cases (dir/model.onnx + dir/test_data_set_N/{input,output}_K.pb)
// through onnx_io::ImportModel and runtime::Interpreter and compares the outputs.
#pragma once

#include <regex>
#include <string>
#include <vector>

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
  std::string filter;  // only cases whose name contains this (QK_CONFORMANCE_FILTER)
  bool verbose = false;  // print every failure's reason (QK_CONFORMANCE_VERBOSE=1)
};

struct SuiteResult {
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;  // "case: reason"
};

// Every subdirectory of `root` holding a model.onnx is a case.
SuiteResult RunSuite(const std::string& root, const std::vector<SkipRule>& skips,
                     const SuiteOptions& options);

}  // namespace quantkit::testing
