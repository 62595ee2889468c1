#include "runtime/device.h"

#include <ATen/Context.h>
#include <torch/version.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "common/check.h"

namespace quantkit::runtime {
namespace {

std::atomic<int> g_default_kind{static_cast<int>(Device::Kind::kCpu)};
std::atomic<int> g_default_index{0};

}  // namespace

std::string Device::ToString() const {
  return is_cuda() ? "cuda:" + std::to_string(index) : "cpu";
}

Result<Device> ParseDevice(const std::string& text) {
  Device d;
  if (text == "cpu") return d;
  d.kind = Device::Kind::kCuda;
  if (text == "cuda") return d;
  const std::string prefix = "cuda:";
  if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0) {
    const std::string num = text.substr(prefix.size());
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(num.c_str(), &end, 10);
    if (errno == 0 && end == num.c_str() + num.size() && num[0] != '-' && num[0] != '+' &&
        v <= 1024) {
      d.index = static_cast<int>(v);
      return d;
    }
  }
  return MakeStatus(StatusCode::kInvalidArgument,
                    "--device '{}' is not a device: expected cpu, cuda or cuda:N", text);
}

bool LibtorchHasCuda() { return at::globalContext().hasCUDART(); }

int CudaDeviceCount() {
  if (!at::hasCUDA()) return 0;
  return static_cast<int>(at::getNumGPUs());
}

Status CheckDeviceAvailable(const Device& device) {
  if (!device.is_cuda()) return Status::Ok();
  if (!LibtorchHasCuda()) {
    return MakeStatus(StatusCode::kUnsupported,
                      "--device {}: this quantkit is built against a libtorch without CUDA "
                      "(Debian's libtorch-dev is CPU-only); build with 'make cuda' (docs/gpu.md)",
                      device.ToString());
  }
  const int count = CudaDeviceCount();
  if (count == 0) {
    return MakeStatus(StatusCode::kUnsupported,
                      "--device {}: no CUDA device is visible (driver missing, "
                      "CUDA_VISIBLE_DEVICES empty, or no GPU in this machine)",
                      device.ToString());
  }
  if (device.index >= count) {
    return MakeStatus(StatusCode::kUnsupported, "--device {}: only {} CUDA device{} visible (cuda:0{})",
                      device.ToString(), count, count == 1 ? " is" : "s are",
                      count == 1 ? "" : "..cuda:" + std::to_string(count - 1));
  }
  return Status::Ok();
}

Status UseDevice(const Device& device) {
  QK_RETURN_IF_ERROR(CheckDeviceAvailable(device));
  if (device.is_cuda()) {
    // FP32 means FP32: PyTorch lets cuDNN convolutions use TF32 by default (10-bit mantissa
    // products), which would move FP32 and simulated-INT8 results by far more than summation
    // order (on an H100, plain_cnn's logits moved by 2^-11 with TF32 on). quantkit's GPU numbers
    // must compare with its CPU numbers and with TensorRT's. Set for every interpreter and
    // trainer on a GPU, not only for the CLI's default device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
    // torch >= 2.9: the fp32_precision settings only; the legacy setters warn there, and mixing
    // the two makes torch's own TF32 queries fail.
    at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::ALL,
                                            at::Float32Precision::IEEE);
#else
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
#endif
  }
  return Status::Ok();
}

Status SetDefaultDevice(const Device& device) {
  QK_RETURN_IF_ERROR(UseDevice(device));
  g_default_index.store(device.index);
  g_default_kind.store(static_cast<int>(device.kind));
  return Status::Ok();
}

Device DefaultDevice() {
  Device d;
  d.kind = static_cast<Device::Kind>(g_default_kind.load());
  d.index = g_default_index.load();
  return d;
}

int64_t DefaultBatchSize(int64_t cpu_default) {
  return DefaultDevice().is_cuda() ? kCudaDefaultBatchSize : cpu_default;
}

}  // namespace quantkit::runtime
