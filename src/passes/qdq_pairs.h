// Recognises the Q/DQ units of a quantized model once, for extract, strip and lint:
//
//   pair:     x --QuantizeLinear(s, z)--> q --DequantizeLinear(s', z')--> y     (fake quantization)
//   dq-only:  W_q (constant int8/uint8) --DequantizeLinear(s, z)--> y          (stored weights)
//
// Scales and zero points must be constant initializers (run PromoteConstants first); a unit with
// a non-constant scale is still reported (lint flags it) but has no numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace quantkit::passes {

struct QdqUnit {
  ir::Node* q = nullptr;  // null for a dq-only unit
  ir::Node* dq = nullptr;
  ir::Value* x = nullptr;        // float input of Q (pair) or the quantized constant (dq-only)
  ir::Value* y = nullptr;        // float output of DQ
  bool constant_params = false;  // scale (and zero point, if any) are initializers
  std::vector<float> scale;      // from Q (pair) or DQ (dq-only), read as float32
  ir::DType scale_dtype = ir::DType::kFloat;  // float32, float16 or bfloat16 as stored
  std::vector<int32_t> zero_point;
  ir::DType quant_dtype = ir::DType::kUint8;  // ONNX default when no zero point is given
  int64_t axis = -1;                          // normalised per-channel axis; -1 per tensor
  bool axis_attr_present = false;
  bool dq_params_match = true;  // DQ uses the same scale/zero point as Q
  bool weight = false;          // x is a float constant (pair) or the unit is dq-only

  bool per_channel() const { return scale.size() > 1; }
  bool symmetric() const;
};

std::vector<QdqUnit> FindQdqUnits(const ir::Graph& graph);

}  // namespace quantkit::passes
