#include "runtime/trt_fusions.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace quantkit::runtime {
namespace {

bool IsOnnx(const ir::Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

// Every reader of `v` satisfies `pred` at one of `inputs`, and `v` is not a graph output.
template <typename Pred>
bool OnlyReadBy(const ir::Value* v, Pred pred, std::initializer_list<int> inputs) {
  if (v == nullptr || v->is_graph_output() || v->uses().empty()) return false;
  for (const ir::Use& use : v->uses()) {
    if (use.node == nullptr || !pred(*use.node)) return false;
    if (std::find(inputs.begin(), inputs.end(), use.input_index) == inputs.end()) return false;
  }
  return true;
}

}  // namespace

bool IsInt8Layer(const ir::Node& node) {
  if (!IsOnnx(node)) return false;
  const std::string& op = node.op_type();
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

bool FusedIntoInt8Layers(const ir::Value* v) { return OnlyReadBy(v, IsInt8Layer, {0, 1}); }

bool RequantizedInEpilogue(const ir::Value* v) {
  return OnlyReadBy(v,
                    [](const ir::Node& n) {
                      return (IsOnnx(n) && n.op_type() == "QuantizeLinear") ||
                             (n.domain() == "com.quantkit" && n.op_type() == "FakeQuantizeLinear");
                    },
                    {0});
}

}  // namespace quantkit::runtime
