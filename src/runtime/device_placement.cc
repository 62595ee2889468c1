#include "runtime/device_placement.h"

namespace quantkit::runtime {

at::Device ToAtenDevice(const Device& device) {
  if (!device.is_cuda()) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.index));
}

at::Tensor ToDevice(const at::Tensor& t, const at::Device& device) {
  if (t.device() == device) return t;
  if (device.is_cuda() && t.device().is_cpu() && t.numel() > 0) {
    return t.pin_memory().to(device, /*non_blocking=*/true);
  }
  return t.to(device);
}

bool KeepOnHost(const at::Tensor& constant) {
  return constant.scalar_type() == at::kLong && constant.numel() <= kHostShapeTensorMaxElements;
}

}  // namespace quantkit::runtime
