// The most memory one tensor of a model run may take, so that a tiny file cannot make gigabytes (a
// 700-byte model whose ConstantOfShape asked for 750 M floats ran `run`, `calibrate` and `lint`
// to 3 GB and "succeeded"). ATen-free header.
//
//   budget = max(kTensorBudgetFloorBytes, kTensorBudgetFactor x (the model's constants + the
//            run's inputs, in bytes))
//
// or, when set, the user's limit (--max-tensor-mb, QUANTKIT_MAX_TENSOR_MB). Real models stay far
// inside it: an activation is a few times its input (64 channels from 3) or a fraction of the
// weights; what breaks it is a shape taken from a tensor's values (ConstantOfShape, Expand, Tile,
// Range, Resize, Pad) set by the file. While Interpreter::Run executes on a thread, every CPU
// allocation made there (ATen's allocator, wrapped once) is checked against the budget before
// it happens; one above it fails the node with kResourceExhausted (exit 5) naming the sizes and
// how to raise the limit. Allocations elsewhere (data loading, other threads, the GPU) are not
// checked.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "quantkit/status.h"

namespace quantkit::runtime {

inline constexpr int64_t kTensorBudgetFloorBytes = int64_t{1} << 30;
inline constexpr int64_t kTensorBudgetFactor = 64;
// The largest explicit limit, in MiB (2^30 MiB = 1 PiB: any machine's memory).
inline constexpr int64_t kMaxTensorBudgetMb = int64_t{1} << 30;

// Sets the per-tensor limit to `mb` MiB, overriding the rule and the environment; 0 goes back
// to them.
Status SetMaxTensorMb(int64_t mb);
// The limit for a run whose model constants and inputs take `model_and_input_bytes`. The first
// call reads QUANTKIT_MAX_TENSOR_MB when SetMaxTensorMb was not called (kInvalidArgument for a
// value that is not a whole number of MiB in [1, kMaxTensorBudgetMb]).
Result<int64_t> TensorBudgetBytes(int64_t model_and_input_bytes);

// Makes the budget active on this thread for its lifetime (an interpreter run). Nested scopes (a
// subgraph's run inside a node) keep the outer budget.
class TensorBudgetScope {
 public:
  explicit TensorBudgetScope(int64_t budget_bytes);
  ~TensorBudgetScope();
  TensorBudgetScope(const TensorBudgetScope&) = delete;
  TensorBudgetScope& operator=(const TensorBudgetScope&) = delete;

 private:
  int64_t previous_ = 0;
};

// Thrown by the allocator for a request above the active budget; the interpreter turns it into
// kResourceExhausted naming the node.
class TensorBudgetExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace quantkit::runtime
