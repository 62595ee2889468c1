// Rewrites  a model at default-domain opset 13..18  ->  the same model at opset 19, the first opset
// whose QuantizeLinear takes an FP16/BF16 input and scale (QuantizeLinear-19: x and y_scale share
// T1 in float, float16, bfloat16). TensorRT 10.0+ parses opsets 9-20 (10.15: 9-24); onnxruntime
// 1.19 and quantkit's interpreter run 19.
//
// What changed between 13 and 19 and needs a rewrite (every other op version of 14-19 only adds
// types or attributes whose defaults keep the old meaning):
//   18  ReduceMean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare take `axes` as an int64 input
//       instead of an attribute: the attribute becomes an initializer input;
//   16  RoiAlign gained coordinate_transformation_mode with default "half_pixel"; the old
//       behaviour is "output_half_pixel", written explicitly when absent.
// Bodies of If/Loop/Scan are rewritten too. The IR version is raised to 9 (the IR of opset 19).
// A model already at 19 or above is left alone (changed == false); below 13 fails (import
// upgrades those to 13 first, onnx/opset_upgrade.h).
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::passes {

inline constexpr int64_t kFloat16QdqOpset = 19;
inline constexpr int64_t kFloat16QdqIrVersion = 9;

// Counts "nodes_converted" (Reduce*/RoiAlign rewritten).
class UpgradeOpset final : public Pass {
 public:
  explicit UpgradeOpset(int64_t target = kFloat16QdqOpset) : target_(target) {}
  const char* Name() const override { return "upgrade_opset"; }
  Status Run(ir::Model& model, PassReport* report) const override;

 private:
  int64_t target_;
};

}  // namespace quantkit::passes
