#include "runtime/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
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
  // ATen's GEMMs run in the BLAS libtorch was linked against. OpenBLAS's pthread build (Debian's
  // libblas.so.3 alternative when libopenblas0-pthread is installed) keeps a pool of its own that
  // ignores at::set_num_threads, so `--threads 1` still ran every MatMul on all CPUs (and its
  // idle workers spun in sched_yield beside ATen's). Looked up at run time: other BLAS builds
  // (MKL in PyPI torch, OpenBLAS's OpenMP build, which follows omp_set_num_threads) lack it or
  // need nothing.
  using SetBlasThreads = void (*)(int);
  if (auto set_blas =
          reinterpret_cast<SetBlasThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(used);
  }
  return used;
}

int ComputeThreads() { return at::get_num_threads(); }

}  // namespace quantkit::runtime
