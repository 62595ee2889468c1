// Observers watch the tensors an Interpreter run produces, without copies and without ATen, so
// that code outside runtime/ (calibration collectors, diagnostics) can consume activations.
//
// Contract:
//  - OnTensor is called once per produced tensor of the top-level graph (graph inputs included,
//    with producer == nullptr), in execution order, right after the producing node ran.
//    Tensors of If/Loop/Scan bodies are reported only to observers whose WantsSubgraphTensors()
//    is true: under their qualified names (ir/scopes.h, "/If.then_branch::t"), the body's inputs
//    included, each time the body runs (every Loop/Scan iteration; an If's branch when taken).
//    Wants() is asked with the qualified name. A value a body captures is not reported again.
//  - The view points at contiguous host memory in the tensor's own dtype and is valid only during
//    the callback: copy what must outlive it. Float tensors are viewed in place (no copy); a
//    non-contiguous result (e.g. a Transpose view) is made contiguous first. When WantsFloat()
//    is true, every numeric tensor is presented as float (converted when it is not float).
//  - Returning a failed Status aborts the run; the interpreter returns that Status.
//  - Device-side statistics: an observer that returns a request from StatsRequestFor() gets
//    OnStats() instead of OnTensor() for tensors that live on a GPU: the statistics are computed
//    there (runtime/tensor_stats.h) and only they are copied to the host. Host tensors still go
//    to OnTensor(), unless QUANTKIT_DEVICE_STATS=1 asks for the device algorithm on the CPU too
//    (a verification switch: its results must equal the host collectors byte for byte).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "quantkit/status.h"

namespace quantkit::ir {
class Node;
}  // namespace quantkit::ir

namespace quantkit::runtime {

struct TensorStats;
struct TensorStatsRequest;

// A non-owning view of a contiguous host tensor.
struct TensorView {
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  const void* data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data);
  }
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Which tensors to report; the default watches every tensor. Called once per tensor name when
  // a run starts, so a subset costs nothing for the others.
  virtual bool Wants(const std::string& tensor_name) const { return true; }
  // Present every numeric tensor as float (calibration collectors want float).
  virtual bool WantsFloat() const { return false; }
  // Also watch the tensors of control-flow bodies (see the contract above).
  virtual bool WantsSubgraphTensors() const { return false; }
  virtual Status OnTensor(const std::string& tensor_name, const ir::Node* producer,
                          const TensorView& view) = 0;
  // Statistics wanted for a tensor when it lives on a device; nullptr (the default): OnTensor
  // with a host copy. The pointer must stay valid during the run.
  virtual const TensorStatsRequest* StatsRequestFor(const std::string& tensor_name) const {
    return nullptr;
  }
  virtual Status OnStats(const std::string& tensor_name, const ir::Node* producer,
                         const TensorStats& stats);
};

// Watches only the named tensors.
class NamedObserver : public Observer {
 public:
  explicit NamedObserver(std::vector<std::string> names) : names_(std::move(names)) {}
  bool Wants(const std::string& tensor_name) const override {
    for (const std::string& n : names_) {
      if (n == tensor_name) return true;
    }
    return false;
  }

 private:
  std::vector<std::string> names_;
};

}  // namespace quantkit::runtime
