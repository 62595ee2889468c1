// The devices the parity checks compare with the CPU (QK_PARITY_DEVICES, see conformance_test.cc).
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"
#include "quantkit/status.h"
#include "runtime/device.h"
#include "testing/emulated_device.h"

namespace quantkit::testing {

// Default: every visible CUDA device, then the emulated device. "none": no device.
inline Result<std::vector<runtime::Device>> ParityDevices() {
  const char* env = std::getenv("QK_PARITY_DEVICES");
  std::vector<runtime::Device> out;
  if (env == nullptr || std::string(env).empty()) {
    for (int i = 0; i < runtime::CudaDeviceCount(); ++i) {
      runtime::Device d;
      d.kind = runtime::Device::Kind::kCuda;
      d.index = i;
      out.push_back(d);
    }
    out.push_back(EmulatedDevice());
    return out;
  }
  std::stringstream ss(env);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name == "none" || name.empty()) continue;
    if (name == "emulated") {
      out.push_back(EmulatedDevice());
      continue;
    }
    QK_ASSIGN_OR_RETURN(runtime::Device d, runtime::ParseDevice(name));
    QK_RETURN_IF_ERROR(runtime::CheckDeviceAvailable(d));
    out.push_back(d);
  }
  return out;
}

}  // namespace quantkit::testing
