// Option pieces every public workflow that runs a model shares, and the process-wide settings
// (compute threads, device, what a distributed launch allows) the CLI's global options set.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <string>

#include "quantkit/status.h"

namespace quantkit {

// Joining the N processes of one job: torchrun, `srun torchrun`, a Kubernetes PyTorchJob
// (docs/distributed.md). A launch is detected from the environment (RANK and WORLD_SIZE): each
// rank works on its shard of the data, results are combined exactly on rank 0, and only rank 0
// writes. Outside a launch the same call runs as one process.
struct DistributedOptions {
  // Fail unless launched (the CLI's --distributed): without it a launch is still detected.
  bool required = false;
  // Seconds to wait for the other ranks at the rendezvous and at each step (--dist-timeout), in
  // [1, 86400]; a rank that died is reported by number when it runs out.
  double timeout_seconds = 1800;
};

// This process's part of a run: rank 0 of 1 outside a launch. Only rank 0's report holds the
// results (text, json, files); every rank has its summary line.
struct RankSummary {
  int rank = 0;
  int world_size = 1;
  // "rank 1/2: samples 512-1023 (512) in 3.10 s (165.2 samples/s)"; empty in one process.
  std::string line;
};

// Compute threads for every model run of this process (0: every CPU it may use; more than that
// is capped there). Returns the number used.
Result<int> SetComputeThreads(int threads);

// Where every model run of this process computes from now on: "cpu", "cuda" or "cuda:N" (weights
// and activations stay on the GPU; docs/gpu.md). Under a launch plain "cuda" is cuda:LOCAL_RANK.
// kInvalidArgument for a malformed name, kUnsupported when CUDA is asked for and the build (or
// the machine) has none: never a silent fall back to the CPU. Returns the device chosen
// ("cuda:1").
Result<std::string> SetDevice(const std::string& device);

// Samples per model run worth keeping a GPU busy: the CLI's default --batch-size on a GPU when
// the user gives none (training batch sizes excepted).
inline constexpr int64_t kGpuDefaultBatchSize = 128;

// For work that runs as one process (`what`, e.g. "`quantkit convert`"): kUnsupported when this
// process is one rank of a multi-rank launch, since N copies would write the same outputs;
// `shared` says what does share its work. Ok outside a launch or with one rank.
Status RefuseUnderLaunch(const std::string& what, const std::string& shared);

}  // namespace quantkit
