#include "runtime/device.h"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

// torch's per-(backend, op) fp32_precision settings with enum arguments: torch 2.11 (the lent
// GPU machines) and 2.15 (.venv-torch) have them. 2.9 spelled them with strings; there, and on
// older torch, the legacy switches below are the whole of it (they reset cuda/conv and
// cuda/rnn to "none", which resolves to no TF32).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#define QK_TORCH_FP32_PRECISION_API 1
#else
#define QK_TORCH_FP32_PRECISION_API 0
#endif

#include "common/check.h"

namespace quantkit::runtime {
namespace {

std::atomic<int> g_default_kind{static_cast<int>(Device::Kind::kCpu)};
std::atomic<int> g_default_index{0};

}  // namespace

std::string Device::ToString() const {
  switch (kind) {
    case Kind::kCuda:
      return "cuda:" + std::to_string(index);
    case Kind::kPrivateUse1:
      return "privateuseone:" + std::to_string(index);
    default:
      return "cpu";
  }
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
  if (device.is_cpu()) return Status::Ok();
  if (device.kind == Device::Kind::kPrivateUse1) {
    if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1) && device.index == 0)
      return Status::Ok();
    return MakeStatus(StatusCode::kUnsupported,
                      "device {}: no PrivateUse1 backend is registered in this process",
                      device.ToString());
  }
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
    return MakeStatus(StatusCode::kUnsupported,
                      "--device {}: only {} CUDA device{} visible (cuda:0{})", device.ToString(),
                      count, count == 1 ? " is" : "s are",
                      count == 1 ? "" : "..cuda:" + std::to_string(count - 1));
  }
  return Status::Ok();
}

namespace {

#if QK_TORCH_FP32_PRECISION_API
constexpr at::Float32Op kOps[] = {at::Float32Op::CONV, at::Float32Op::RNN, at::Float32Op::MATMUL};
const char* OpName(at::Float32Op op) {
  return op == at::Float32Op::CONV ? "conv" : op == at::Float32Op::RNN ? "rnn" : "matmul";
}
const char* PrecisionName(at::Float32Precision p) {
  switch (p) {
    case at::Float32Precision::IEEE:
      return "ieee";
    case at::Float32Precision::TF32:
      return "tf32";
    case at::Float32Precision::BF16:
      return "bf16";
    case at::Float32Precision::NONE:
      return "none";
    default:
      return "other";
  }
}
#endif

}  // namespace

void UseIeeeFloat32() {
  at::Context& ctx = at::globalContext();
  // The legacy switches first, on every torch: cuDNN's TF32 flag and the matmul precision
  // ("highest" = cuBLAS without TF32; torch >= 2.9 also sets the cuda and mkldnn matmul entries
  // of fp32_precision to ieee with it).
  ctx.setAllowTF32CuDNN(false);
  ctx.setFloat32MatmulPrecision("highest");
#if QK_TORCH_FP32_PRECISION_API
  // torch >= 2.9 resolves a precision per (backend, op): the leaf entry, then the backend's
  // "all", then "generic". cuda/conv and cuda/rnn default to tf32 as leaves, so setting
  // cuda/all alone (this function until issue 26) left cuDNN convolutions on TF32: plain_cnn's
  // logits still moved by 2^-11 on an H200 with torch 2.11. Every leaf is set, and set after the
  // legacy calls above, which reset cuda/conv and cuda/rnn to "none".
  for (at::Float32Backend backend : {at::Float32Backend::CUDA, at::Float32Backend::MKLDNN}) {
    ctx.setFloat32Precision(backend, at::Float32Op::ALL, at::Float32Precision::IEEE);
    for (at::Float32Op op : kOps) ctx.setFloat32Precision(backend, op, at::Float32Precision::IEEE);
  }
#endif
}

bool Float32IsIeee(std::string* report) {
  const at::Context& ctx = at::globalContext();
  std::vector<std::pair<std::string, bool>> settings;  // (name=value, is ieee)
  const bool cudnn_tf32 = ctx.allowTF32CuDNN();
  settings.emplace_back(fmt::format("allow_tf32_cudnn={}", cudnn_tf32), !cudnn_tf32);
  const bool cublas_tf32 = ctx.allowTF32CuBLAS();
  settings.emplace_back(fmt::format("allow_tf32_cublas={}", cublas_tf32), !cublas_tf32);
  const bool highest = ctx.float32MatmulPrecision() == at::Float32MatmulPrecision::HIGHEST;
  settings.emplace_back(
      fmt::format("float32_matmul_precision={}", highest ? "highest" : "high/medium"), highest);
#if QK_TORCH_FP32_PRECISION_API
  for (at::Float32Backend backend : {at::Float32Backend::CUDA, at::Float32Backend::MKLDNN}) {
    for (at::Float32Op op : kOps) {
      const at::Float32Precision p = ctx.float32Precision(backend, op);
      settings.emplace_back(fmt::format("{}.{}.fp32_precision={}",
                                        backend == at::Float32Backend::CUDA ? "cuda" : "mkldnn",
                                        OpName(op), PrecisionName(p)),
                            p == at::Float32Precision::IEEE);
    }
  }
#endif
  bool ieee = true;
  std::string text;
  for (const auto& [name, ok] : settings) {
    ieee &= ok;
    text += (text.empty() ? "" : " ") + name;
  }
  if (report != nullptr) *report = text;
  return ieee;
}

Status UseDevice(const Device& device) {
  QK_RETURN_IF_ERROR(CheckDeviceAvailable(device));
  // FP32 means FP32: PyTorch lets cuDNN convolutions use TF32 by default (10-bit mantissa
  // products), which would move FP32 and simulated-INT8 results by far more than summation
  // order (on an H100, plain_cnn's logits moved by 2^-11 with TF32 on). quantkit's GPU numbers
  // must compare with its CPU numbers and with TensorRT's. Set for every interpreter and
  // trainer, on every device: the settings are process-wide, and on the CPU they govern
  // oneDNN's reduced-precision modes.
  UseIeeeFloat32();
  return Status::Ok();
}

namespace {
std::mutex g_retries_mutex;
std::map<std::string, int64_t> g_retries;
}  // namespace

void CountMixedDeviceRetry(const std::string& op_type) {
  std::lock_guard<std::mutex> lock(g_retries_mutex);
  ++g_retries[op_type];
}

std::string MixedDeviceRetries() {
  std::lock_guard<std::mutex> lock(g_retries_mutex);
  std::string out;
  for (const auto& [op, n] : g_retries)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", op, n);
  return out;
}

void ResetMixedDeviceRetries() {
  std::lock_guard<std::mutex> lock(g_retries_mutex);
  g_retries.clear();
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
