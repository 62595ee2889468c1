// The kernel interface (runtime-internal: includes ATen).
//
// A Kernel is created once per node when an Interpreter is built. Its factory reads and validates
// the node's attributes (and whatever it can of its inputs: constant initializers, declared
// dtypes) and returns a Status naming node, op type, opset and tensor on failure. Compute() is
// const, reads only what the factory stored, and reports data-dependent problems (a shape that
// does not broadcast...) by throwing KernelError or letting ATen throw c10::Error; the interpreter
// turns both into a Status that names the node.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/check.h"
#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::runtime {

// A data-dependent failure inside Compute (the message need not name the node).
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define QK_KERNEL_CHECK(cond, ...)                                                 \
  do {                                                                             \
    if (!(cond)) throw ::quantkit::runtime::KernelError(fmt::format(__VA_ARGS__)); \
  } while (0)

class SubgraphPlan;  // a compiled If/Loop body (interpreter.cc)
class KernelContext;

// What a factory may look at while building a kernel.
struct KernelInit {
  const ir::Node& node;
  int64_t opset = 0;
  // Compiles an attribute subgraph (If/Loop bodies) into an executable plan.
  std::function<Result<std::shared_ptr<const SubgraphPlan>>(const ir::Graph&)> compile_subgraph;
  // Run 2-D float convolutions in channels-last memory order (InterpreterOptions::channels_last).
  bool channels_last = false;

  // "node 'conv1' (Conv, opset 11)" for messages.
  std::string Where() const;
  // Name of input i ("" when omitted).
  std::string InputName(size_t i) const;
  bool HasInput(size_t i) const { return node.input(i) != nullptr; }
  // The constant value of input i when it is an initializer (not overridable), else nullptr.
  const ir::Tensor* ConstInput(size_t i) const;
  // Builds an error Status prefixed with Where().
  template <typename... Args>
  Status Error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) const {
    return Status(code, Where() + ": " + fmt::format(format, std::forward<Args>(args)...));
  }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::vector<at::Tensor> Compute(KernelContext& ctx) const = 0;
};
using KernelPtr = std::unique_ptr<Kernel>;

// Inputs of one node execution; an omitted optional input is an undefined at::Tensor.
//
// An input that this node reads last (and once) is handed over: the context then holds the only
// reference the interpreter had, and when in(i).use_count() == 1 and its storage has no other
// owner, the kernel may write its output into that buffer. Observers have already seen the value
// (they are called when it is produced). A buffer ATen did not allocate (a fed tensor wrapping
// the caller's memory: storage not resizable) must never be written.
class KernelContext {
 public:
  KernelContext(const std::vector<at::Tensor>& inputs, size_t num_outputs, void* frame)
      : inputs_(inputs), num_outputs_(num_outputs), frame_(frame) {}
  size_t num_inputs() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  const at::Tensor& in(size_t i) const;
  size_t num_outputs() const { return num_outputs_; }
  // Runs a compiled subgraph with the given inputs; outer-scope captures are resolved through
  // the calling frame. Returns the subgraph outputs.
  std::vector<at::Tensor> RunSubgraph(const SubgraphPlan& plan,
                                      const std::vector<at::Tensor>& inputs) const;

 private:
  const std::vector<at::Tensor>& inputs_;
  size_t num_outputs_;
  void* frame_;
};

// A kernel from a lambda `std::vector<at::Tensor>(KernelContext&)` that captured its attributes.
template <typename F>
class FnKernel final : public Kernel {
 public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  std::vector<at::Tensor> Compute(KernelContext& ctx) const override { return f_(ctx); }

 private:
  F f_;
};
template <typename F>
Result<KernelPtr> MakeKernel(F f) {
  return KernelPtr(new FnKernel<F>(std::move(f)));
}

using KernelFactory = Result<KernelPtr> (*)(const KernelInit&);

// --- helpers shared by the op files ---

// The node's name, or "<producing OUT>" for unnamed nodes (common in exported models).
std::string DisplayName(const ir::Node& node);
// "node 'conv1' (Conv, opset 11)": the prefix of every message about a node.
std::string DescribeNode(const ir::Node& node, int64_t opset);

// Normalises a possibly negative axis against `rank`; throws KernelError when out of range.
int64_t NormAxis(int64_t axis, int64_t rank);
// Reads a 1-D (or scalar) integer tensor as int64 values.
std::vector<int64_t> ToInt64Vector(const at::Tensor& t);
std::vector<double> ToDoubleVector(const at::Tensor& t);
// --- quantized arithmetic shared by QuantizeLinear and the QLinear*/…Integer ops ---

// q - zero_point in double (exact for 8/16-bit integers). `zp` is undefined (zero), a single
// value, or a 1-D vector along dim `axis` of q (per row / per output channel).
at::Tensor CenterZeroPoint(const at::Tensor& q, const at::Tensor& zp, int64_t axis);
// [qmin, qmax] of an integer quantized type; false for other types.
bool QuantRange(at::ScalarType t, double* lo, double* hi);
// saturate(round_half_to_even(real / y_scale) + y_zero_point), in y_zero_point's dtype.
at::Tensor Requantize(const at::Tensor& real, const at::Tensor& y_scale,
                      const at::Tensor& y_zero_point);

// The ONNX dtype attribute value (TensorProto.DataType) as an ATen scalar type; false if none.
bool OnnxToScalarType(int64_t onnx_dtype, at::ScalarType* out);

}  // namespace quantkit::runtime
