// The kernel registry: an explicit table keyed by (domain, op_type, opset range), see registry.cc
// for the table and how to add an opset version. No static self-registration: the table is built
// on first use from functions each op file exports.
//
// This header is ATen-free so tools can list and check op coverage.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::runtime {

struct KernelInit;
class Kernel;
using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelInit&);

inline constexpr int64_t kLatestOpset = std::numeric_limits<int32_t>::max();

// One row: the kernel serving `op_type` in `domain` ("" = ai.onnx) for opsets
// [since_version, until_version] (inclusive).
struct KernelEntry {
  std::string domain;
  std::string op_type;
  int64_t since_version = 1;
  int64_t until_version = kLatestOpset;
  KernelFactory factory = nullptr;
};
using KernelTable = std::vector<KernelEntry>;

// The factory serving (domain, op_type) at the model's opset for that domain, or nullptr.
// `opset` is the model's opset import for the domain (ONNX resolves an op to the newest
// since_version <= opset, so a row covers every opset from its since_version until the next).
KernelFactory FindKernel(const std::string& domain, const std::string& op_type, int64_t opset);
// Every row, for listings and coverage tests.
const KernelTable& RegisteredKernels();

}  // namespace quantkit::runtime
