// What calibrate and eval share to run as N processes of one job (docs/distributed.md).
//
// Every rank opens the whole data source (so provenance names all of it), works on its shard
// (data/shard.h: contiguous, in rank order, on batch boundaries), and the results are combined
// exactly on rank 0: statistics through the .qkstats merge (serialized, gathered, merged in rank
// order), counts by integer sums, floating-point sums per batch and added in batch order — the
// order one process uses — so rank 0's artifacts are byte-identical to a single-process run.
// Only rank 0 writes. A single process runs the same code with a one-rank communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/shard.h"
#include "data/source.h"
#include "distributed/communicator.h"
#include "formats/qkstats.h"
#include "quantkit/status.h"
#include "runtime/device.h"

namespace quantkit::distributed {

struct DistributedOptions {
  // --distributed: fail unless launched by torchrun/srun/a PyTorchJob. Without it, a launch is
  // still detected from the environment (RANK and WORLD_SIZE set).
  bool required = false;
  std::chrono::milliseconds timeout = kDefaultDistributedTimeout;  // --dist-timeout
};

// What this rank did, for its summary line.
struct RankReport {
  int rank = 0;
  int world_size = 1;
  data::ShardRange shard;    // this rank's samples
  int64_t passes = 1;        // runs over the shard (analyze, fallback: one per trial)
  double work_seconds = 0;   // local model runs
  double merge_seconds = 0;  // gathering and combining on rank 0 (0 elsewhere)
  double write_seconds = 0;  // writing the artifacts (rank 0)
};

// --device for this process: ParseDeviceForRank under the launch environment (plain `cuda` is
// cuda:LOCAL_RANK) made the default device of every model run (runtime::SetDefaultDevice):
// kInvalidArgument for a malformed name, kUnsupported when CUDA is asked for and the build or the
// machine has none. A malformed launch environment only means that LOCAL_RANK cannot pick the
// GPU here (the distributed workflows report it, naming the variable).
Result<runtime::Device> SelectDevice(const std::string& text);

// Work that runs as one process: kUnsupported, naming `what` and `shared` (what does share its
// work), when this process is one rank of a multi-rank launch, since N copies would write the
// same outputs. Ok outside a launch or with one rank.
Status RefuseUnderLaunch(const std::string& what, const std::string& shared);

// This process's communicator: a Gloo group when launched, else a single process.
// The launch environment, checked against options (--distributed without a launch is an error)
// without connecting: what a command checks before it reads anything. nullopt: no launch.
Result<std::optional<DistributedEnv>> CheckLaunch(const DistributedOptions& options);
Result<std::unique_ptr<Communicator>> OpenCommunicator(const DistributedOptions& options);

// Restricts `source` to this rank's shard (boundaries on multiples of `granule`).
std::unique_ptr<data::Source> ShardForRank(std::unique_ptr<data::Source> source,
                                           const Communicator& comm, int64_t granule,
                                           RankReport* report);

// Rank 0 gets every rank's statistics merged in rank order (the others get theirs back
// unchanged); every rank must call it.
Result<formats::StatsFile> MergeStatsOnRoot(Communicator& comm, formats::StatsFile local);

// "rank 1/2: samples 512-1023 (512) in 3.10 s (165.2 samples/s)"; with passes > 1
// "rank 1/2: samples 512-1023 (512), 25 passes in 3.10 s (4129.0 samples/s)"
std::string FormatRankLine(const RankReport& report);

}  // namespace quantkit::distributed
