#include "runtime/threads.h"

#include <ATen/Parallel.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/check.h"

namespace quantkit::runtime {

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

int DefaultComputeThreads() {
  // torchrun/srun start LOCAL_WORLD_SIZE ranks on this machine: each takes its share of the
  // CPUs instead of all of them (N ranks x all CPUs oversubscribes and runs slower than one).
  int ranks_here = 1;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) ranks_here = std::max(1, std::atoi(v));
  return std::max(1, UsableCpus() / ranks_here);
}

Result<int> SetComputeThreads(int threads) {
  QK_RETURN_IF_NOT(threads >= 0, StatusCode::kInvalidArgument,
                   "--threads must be >= 0 (0: every usable CPU), got {}", threads);
  const int usable = UsableCpus();
  const int used = threads == 0 ? DefaultComputeThreads() : std::min(threads, usable);
  at::set_num_threads(used);
  return used;
}

int ComputeThreads() { return at::get_num_threads(); }

}  // namespace quantkit::runtime
