// Processes working on one job: torch.distributed's C++ core (c10d) behind an ATen-free interface.
//
// A job launched by torchrun, `srun torchrun` or a Kubernetes PyTorchJob finds its place in the
// standard environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
// Connect() meets the other ranks at a c10d TCPStore on MASTER_ADDR:MASTER_PORT (torchrun's agent
// hosts it when TORCHELASTIC_USE_AGENT_STORE=True, rank 0 otherwise) and builds a Gloo process
// group (CPU, TCP) over it. No byte of the transport is quantkit's own.
//
// Every collective is called by every rank in the same order (SPMD). Guarantees:
//   - results are identical on every rank and deterministic: integer sums are exact, and byte
//     gathers keep rank order, so callers combine floating-point values in a fixed order;
//   - nothing blocks forever: the rendezvous and each collective end after their timeout, and a
//     rank that died (killed, crashed, out of memory) is reported by number: before each
//     collective a rank records its arrival in the store, so the survivors can tell who never came;
//   - Agree() turns one rank's failure into the same error on every rank, naming that rank.
// Errors are Status values; c10d and Gloo exceptions never escape.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/status.h"
#include "runtime/device.h"

namespace quantkit::distributed {

// This process's place in a launch (what torchrun exports).
struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // picks the GPU of this rank on its machine
  int local_world_size = 1;  // ranks on this machine (shares of its CPUs)
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  // torchrun's agent already serves the TCPStore at MASTER_PORT
  std::string run_id;        // TORCHELASTIC_RUN_ID + restart count: namespaces the store keys
};

// Reads the launch environment through `getenv`. std::nullopt when WORLD_SIZE and RANK are both
// unset (not launched); a partial or inconsistent environment (RANK without WORLD_SIZE, RANK >=
// WORLD_SIZE, a port that is not a number) is kInvalidArgument naming the variable.
using GetEnvFn = std::function<const char*(const char*)>;
Result<std::optional<DistributedEnv>> ReadDistributedEnv(const GetEnvFn& getenv_fn);
Result<std::optional<DistributedEnv>> ReadDistributedEnv();  // the process environment
// Whether this process writes a launch's outputs: rank 0 of a launch, or no launch (read from the
// environment before any rendezvous, so that rank 0 can lock its output directory first).
bool WritesLaunchOutputs();

// --device of one rank: ParseDevice(text), except that under a launch plain `cuda` means
// cuda:LOCAL_RANK. torchrun starts one process per GPU of a machine (LOCAL_RANK 0 ..
// LOCAL_WORLD_SIZE-1), as torch's own scripts do with torch.cuda.set_device(local_rank); without
// this every rank would share GPU 0. An explicit cuda:N is kept (the user's choice, even when
// ranks then share a GPU), and so are the CPU and a process outside a launch (env empty).
Result<runtime::Device> ParseDeviceForRank(const std::string& text,
                                           const std::optional<DistributedEnv>& env);

inline constexpr std::chrono::seconds kDefaultDistributedTimeout{1800};  // torch's default too

struct CommunicatorOptions {
  // How long to wait for every rank to arrive at the rendezvous, and for each collective (a
  // collective waits for the slowest rank's work before it, so this bounds a hung rank).
  std::chrono::milliseconds timeout = kDefaultDistributedTimeout;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;
  bool is_root() const { return rank() == 0; }

  // Element-wise sum over ranks of equally long vectors; every rank gets the sum (exact).
  virtual Status AllReduceSum(std::vector<int64_t>* values, const std::string& what) = 0;
  // Every rank's bytes, in rank order, on every rank (sizes may differ).
  virtual Result<std::vector<std::string>> AllGather(const std::string& bytes,
                                                     const std::string& what) = 0;
  // Every rank's bytes, in rank order, on rank 0; an empty vector on the other ranks.
  virtual Result<std::vector<std::string>> GatherToRoot(const std::string& bytes,
                                                        const std::string& what) = 0;
  // Rank 0's bytes on every rank.
  virtual Result<std::string> Broadcast(const std::string& bytes, const std::string& what) = 0;
  virtual Status Barrier(const std::string& what) = 0;

  // Every rank passes its own outcome of a step; all get OK, or all get the error of the lowest
  // failing rank with its code (so exit codes stay meaningful), prefixed "rank R of N failed: "
  // on the others and "rank R of N: " on R itself (nothing in a single process). `step` names
  // what was being done when a rank went missing.
  Status Agree(const Status& local, const std::string& step);
};

// One process: every collective returns its input (rank 0 of 1). No c10d involved.
std::unique_ptr<Communicator> SingleProcessCommunicator();

// Rendezvous with the other ranks of `env` and a Gloo process group over them. Fails after
// options.timeout naming the address, the world size and the ranks that never arrived.
Result<std::unique_ptr<Communicator>> Connect(const DistributedEnv& env,
                                              const CommunicatorOptions& options);

}  // namespace quantkit::distributed
