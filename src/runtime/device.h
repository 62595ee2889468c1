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
  // kPrivateUse1: ATen's PrivateUse1 backend, which no user names (ParseDevice rejects it): the
  // tests register it as an emulated accelerator over host memory that refuses host tensors
  // in device math the way CUDA does (tests/testing/emulated_device.h), so that the device
  // route is exercised on CPU-only machines.
  enum class Kind { kCpu, kCuda, kPrivateUse1 };
  Kind kind = Kind::kCpu;
  int index = 0;  // device ordinal; 0 for the CPU

  bool is_cuda() const { return kind == Kind::kCuda; }
  bool is_cpu() const { return kind == Kind::kCpu; }
  std::string ToString() const;  // "cpu", "cuda:0", "privateuseone:0"
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
// CheckDeviceAvailable, then UseIeeeFloat32(). Every interpreter and trainer calls it for its
// device (Interpreter::Create, QatTrainer::Create).
Status UseDevice(const Device& device);

// FP32 means IEEE float32 in every ATen backend: no TF32 in cuDNN convolutions and RNNs or in
// cuBLAS matmuls, no TF32/BF16 in oneDNN (mkldnn) on CPUs that offer them. PyTorch enables TF32
// for cuDNN by default, and an embedding process (Python) may have set any of these. The
// settings are process-wide (ATen's global context): set on every device, so that the CPU
// builds check them too (tests/unit/runtime/device_numerics_test.cc).
void UseIeeeFloat32();
// The settings as ATen reads them back, one "name=value" per setting (torch >= 2.9: the
// fp32_precision of cuda/mkldnn x conv/matmul/rnn and the legacy flags; older torch: the legacy
// flags). True when every one of them is IEEE float32; `report` gets the list when not null.
bool Float32IsIeee(std::string* report = nullptr);

// Node kernels that met inputs on two devices and were run again (interpreter.cc, ComputeStep):
// correct but slow (a failed dispatch, copies, and for the host retry a device->host->device
// round trip). Counted per op type, process-wide, for tests and benchmarks to report.
void CountMixedDeviceRetry(const std::string& op_type);
std::string MixedDeviceRetries();  // "Resize=3 Gather=1", empty when none
void ResetMixedDeviceRetries();

// The device new interpreters use (default: the CPU). Checks availability first.
Status SetDefaultDevice(const Device& device);
Device DefaultDevice();

// Samples per model run when the user gives no --batch-size: large enough to keep a GPU busy
// (kCudaDefaultBatchSize), the pipelines' own CPU defaults otherwise.
inline constexpr int64_t kCudaDefaultBatchSize = 128;
int64_t DefaultBatchSize(int64_t cpu_default);

}  // namespace quantkit::runtime
