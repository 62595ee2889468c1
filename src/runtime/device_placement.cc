#include "runtime/device_placement.h"

namespace quantkit::runtime {

at::Device ToAtenDevice(const Device& device) {
  const auto index = static_cast<c10::DeviceIndex>(device.index);
  switch (device.kind) {
    case Device::Kind::kCuda:
      return at::Device(at::kCUDA, index);
    case Device::Kind::kPrivateUse1:
      return at::Device(at::kPrivateUse1, index);
    default:
      return at::Device(at::kCPU);
  }
}

at::Tensor ToDevice(const at::Tensor& t, const at::Device& device) {
  if (t.device() == device) return t;
  if (device.is_cuda() && t.device().is_cpu() && t.numel() > 0) {
    return t.pin_memory().to(device, /*non_blocking=*/true);
  }
  return t.to(device);
}

bool KeepOnHost(const at::Tensor& t) {
  return (at::isIntegralType(t.scalar_type(), /*includeBool=*/true)) &&
         t.numel() <= kHostShapeTensorMaxElements;
}

}  // namespace quantkit::runtime
