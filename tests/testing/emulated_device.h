// An emulated accelerator for CPU-only machines: ATen's PrivateUse1 backend ("privateuseone"),
// registered by the tests as host memory behind a device that follows a GPU's placement rules.
//
// Why: a kernel that builds a temporary on the host (at::zeros({n}, at::kDouble)) and mixes it
// into device math runs on the CPU and fails on a GPU ("Expected all tensors to be on the same
// device ... wrapper_CUDA_bmm"). Without a GPU the only way to see that is a second device type
// that ATen treats as distinct from the CPU. Meta tensors are one, but they hold no values, and
// quantkit's kernels read shape inputs (Reshape targets, Slice bounds) on the host. This device
// holds real values: every ATen operator on it runs ATen's CPU kernel on the same memory, after
// one check that mirrors CUDA's: all tensor arguments are on this device, except 0-dim host
// tensors (CUDA accepts those as scalars) and the copy operators (which move between devices).
// A host tensor mixed in fails with ATen's own "Expected all tensors to be on the same device".
//
// What it cannot see: a raw host read of device memory (x.data_ptr<float>()[i] on a CUDA tensor
// reads garbage or faults; here the memory is host memory). tests/unit/runtime/device_audit_test.py
// covers that with a source audit of runtime/ops.
#pragma once

#include "runtime/device.h"

namespace quantkit::testing {

// Registers the emulated device once per process (ATen's PrivateUse1 dispatch key, device
// guard, host-memory storage) and returns it as a quantkit device (Kind::kPrivateUse1).
runtime::Device EmulatedDevice();

// Mixed-device errors raised by the emulated device since the process started (every one is
// also an exception that the interpreter either reports or retries; tests read this counter).
int64_t EmulatedDeviceMixedCalls();

}  // namespace quantkit::testing
