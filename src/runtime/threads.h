// Process-wide compute threads of the runtime (ATen intra-op parallelism).
//
// ATen's own default is not the machine's core count everywhere: Debian's libtorch 1.13 starts
// with one OpenMP thread on a 2-core machine (omp_get_max_threads() == 1), which halves
// calibration and evaluation throughput against onnxruntime (two threads there). quantkit sets
// the count explicitly: every CPU this process may run on, unless the user asks otherwise.
#pragma once

#include "quantkit/status.h"

namespace quantkit::runtime {

// CPUs in this process's affinity mask (at least 1).
int UsableCpus();
// UsableCpus() shared among the ranks a distributed launch runs on this machine
// (LOCAL_WORLD_SIZE, set by torchrun), at least 1.
int DefaultComputeThreads();
// 0 selects DefaultComputeThreads(); a request above UsableCpus() is capped there (more threads
// than CPUs only adds contention, and 100000 used to spawn thousands of OS threads). Returns the
// count in effect, so the caller can say when it differs from the request. Must be called before
// the first model run to take effect everywhere.
Result<int> SetComputeThreads(int threads);
int ComputeThreads();

}  // namespace quantkit::runtime
