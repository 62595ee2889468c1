// Where model runs compute: the CPU or one CUDA device (ATen-free header).
//
//   --device cpu | cuda | cuda:N        (run, calibrate, eval, analyze, fallback, diagnose)
//
// The device is a process-wide default, like the compute threads (runtime/threads.h): the CLI
// sets it once and every Interpreter created afterwards places its weights there, copies each
// batch's inputs there (from pinned host memory, asynchronously) and keeps every activation
// there; only graph outputs, observer views and statistics come back to the host (docs/gpu.md).
// Asking for CUDA where the libtorch has no CUDA (Debian's libtorch-dev is CPU-only) or the
// machine shows no GPU is kUnsupported (exit 3), never a silent fall back to the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "quantkit/status.h"

namespace quantkit::runtime {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  bool is_cuda() const { return kind == Kind::kCuda; }
  std::string ToString() const;  // "cpu", "cuda:0"
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// "cpu", "cuda" (= cuda:0) or "cuda:N". Anything else is kInvalidArgument.
Result<Device> ParseDevice(const std::string& text);

// True when the linked libtorch was built with CUDA (PyPI torch; Debian's is CPU-only).
bool LibtorchHasCuda();
// CUDA devices the process can see (0 without CUDA).
int CudaDeviceCount();
// Ok for the CPU; kUnsupported naming what is missing (CUDA in the build, a GPU, device N).
Status CheckDeviceAvailable(const Device& device);
// CheckDeviceAvailable, then the numerics quantkit needs on it (on a GPU: no TF32). Every
// interpreter and trainer calls it for its device.
Status UseDevice(const Device& device);

// The device new interpreters use (default: the CPU). Checks availability first.
Status SetDefaultDevice(const Device& device);
Device DefaultDevice();

// Samples per model run when the user gives no --batch-size: large enough to keep a GPU busy
// (kCudaDefaultBatchSize), the pipelines' own CPU defaults otherwise.
inline constexpr int64_t kCudaDefaultBatchSize = 128;
int64_t DefaultBatchSize(int64_t cpu_default);

}  // namespace quantkit::runtime
