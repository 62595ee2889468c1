// Builds and runs a one-node model in the IR (no ONNX files), for literal-table op tests.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/interpreter.h"

namespace quantkit::testing {

struct SingleNode {
  SingleNode(std::string op, int64_t version, std::vector<ir::Tensor> in,
             std::vector<ir::Attribute> a = {}, size_t outputs = 1)
      : op_type(std::move(op)),
        opset(version),
        inputs(std::move(in)),
        attrs(std::move(a)),
        num_outputs(outputs) {}
  std::string op_type;
  int64_t opset = 21;
  std::vector<ir::Tensor> inputs;  // fed as graph inputs "in0", "in1", ... (empty dtype = omitted)
  std::vector<ir::Attribute> attrs;
  size_t num_outputs = 1;
};

// Runs the node; returns its outputs or the failure Status.
Result<std::vector<ir::Tensor>> RunSingleNode(SingleNode spec);

template <typename T>
std::vector<T> Values(const ir::Tensor& t) {
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.numel());
}

}  // namespace quantkit::testing
