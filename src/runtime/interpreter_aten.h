// The ATen-level entry point of the interpreter, for code inside runtime/ (INT8 simulation,
// QAT): tensors stay at::Tensor end to end, and a hook may replace any produced tensor (fake
// quantization) before observers and consumers see it.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/interpreter.h"

namespace quantkit::runtime {

struct AtenRunOptions {
  std::vector<Observer*> observers;
  // Called for each produced top-level tensor (graph inputs included, producer == nullptr);
  // may replace `value`. Runs before the observers.
  std::function<Status(const std::string& name, const ir::Node* producer, at::Tensor& value)> hook;
  RunStats* stats = nullptr;
  // Values that replace the graph's initializers of the same name for this run (trainable
  // parameters in QAT: autograd then reaches them). Each must name a top-level initializer and
  // match its dtype and shape. Not owned.
  const std::vector<std::pair<std::string, at::Tensor>>* parameters = nullptr;
};

// Runs with at::Tensor inputs (any device/strides; dtypes must match the graph's inputs).
Result<std::vector<at::Tensor>> RunAten(
    const Interpreter& interpreter, const std::vector<std::pair<std::string, at::Tensor>>& inputs,
    const AtenRunOptions& options = {});

}  // namespace quantkit::runtime
