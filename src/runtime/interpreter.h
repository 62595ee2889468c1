// runtime::Interpreter executes an ir::Model by calling ATen operators (ATen-free header).
//
//   auto interp = Interpreter::Create(model);            // resolves every kernel up front
//   auto outs = (*interp)->Run({{"x", tensor}}, {.observers = {&collector}});
//
// Create() builds one Kernel per node (subgraphs of If/Loop included) and validates attributes;
// an unsupported op fails here, before any compute, with
//   unsupported op 'X' (domain 'ai.onnx', opset N) at node 'Y'.
// Run() checks input names, dtypes and ranks/fixed dims, warns about NaN/Inf in float inputs,
// executes nodes in topological order and frees every intermediate after its last consumer, so
// peak memory follows liveness, not graph size. Shapes may change from run to run. Run() is
// const and may be called concurrently from several threads.
//
// Errors: kInvalidArgument for bad inputs or data-dependent failures, kResourceExhausted for
// allocation failures, kUnsupported for ops/dtypes the runtime lacks; messages name the node.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "quantkit/status.h"
#include "runtime/device.h"
#include "runtime/observer.h"

namespace quantkit::runtime {

struct NamedTensor {
  std::string name;
  ir::Tensor tensor;
};

struct InterpreterOptions {
  // Receives warnings (NaN/Inf in inputs...). Default: "quantkit: warning: ..." on stderr.
  std::function<void(const std::string&)> warn;
  // Scan float inputs for NaN/Inf before each run (one pass over the inputs).
  bool check_finite_inputs = true;
  // A float input given in another float width is converted to the input's type: float32 for a
  // float16/bfloat16 input (a model written with --cast-io) rounded to nearest even, as
  // data::Conform rounds float32 data and the deployment's own conversion does; 16-bit values for
  // a float32 input widened exactly. So one batch feeds a --cast-io model and its FP32 reference.
  // Any other dtype mismatch stays an error.
  bool convert_float_inputs = true;
  // Where weights and activations live (default: runtime::DefaultDevice(), i.e. --device).
  // Inputs may be given on the host; outputs of Run() come back to the host.
  std::optional<Device> device;
  // Training mode (QAT, train/qat_trainer.h): also resolves the training-only ops of
  // runtime/training_ops.h (FakeQuantize). Gradients are recorded only by RunAten, which leaves
  // autograd on; Run() always executes under inference mode.
  bool training = false;
  // Channels-last execution on the CPU: 2-D float convolutions read and write NHWC memory
  // (oneDNN's NHWC kernels, no per-call reorders; weights reordered once), and the ops between
  // them keep that memory order. The values are the same tensors in NCHW semantics: observers
  // and outputs see contiguous NCHW data. Only the summation order inside kernels may differ.
  // Never in training mode or on a GPU; only in runs nobody observes (memory_order.h). Unset:
  // off, unless the environment sets QUANTKIT_CHANNELS_LAST=1 (docs/performance.md).
  std::optional<bool> channels_last;
};

// Memory accounting of one run (filled when RunOptions::stats is set; costs a pass over the
// live values after each node, so only ask for it in tests and benchmarks).
struct RunStats {
  int64_t peak_live_bytes = 0;   // max over steps of the bytes held by live values
  int64_t peak_live_values = 0;  // max over steps of the number of live values
};

struct RunOptions {
  std::vector<Observer*> observers;  // not owned; called in order for each produced tensor
  RunStats* stats = nullptr;
};

class Interpreter {
 public:
  struct Impl;

  static Result<std::unique_ptr<Interpreter>> Create(std::shared_ptr<const ir::Model> model,
                                                     InterpreterOptions options = {});
  static Result<std::unique_ptr<Interpreter>> Create(ir::Model&& model,
                                                     InterpreterOptions options = {});
  ~Interpreter();

  // Graph inputs a caller must feed (initializers that are also inputs are optional overrides).
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  const ir::Model& model() const;
  Device device() const;

  // Outputs in graph-output order.
  Result<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs,
                                       const RunOptions& options = {}) const;

  const Impl& impl() const { return *impl_; }

 private:
  explicit Interpreter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace quantkit::runtime
