// Lints a Q/DQ model for TensorRT explicit quantization (calibration-spec §5; onnx-tensorrt's
// QuantDequantLinearHelper checks and TensorRT's placement guidance). Each finding names the
// node, says why TensorRT rejects or slows it, and how to fix it.
//
// Rules (severity):
//   QK001 error    non-zero zero point            TensorRT supports symmetric quantization only
//   QK002 error    uint8/int16/int32 Q/DQ         TensorRT quantizes to INT8/FP8/INT4 only
//   QK003 error    scale <= 0, NaN or Inf          "Scale coefficients must all be positive"
//   QK004 error    scale/zero point not constant  must be build-time constants
//   QK005 error    per-channel on an activation   per-channel is supported for weights only
//   QK006 error    per-channel without `axis`     the parser assumes axis 0, ONNX means axis 1
//   QK007 error    opset too low for the feature  per-axis needs 13, float8 19, int4/blocked 21
//   QK008 warning  Q and DQ use different params  not a fake-quant pair: TensorRT requantizes
//   QK009 warning  residual Add inputs quantized with different scales (or Q/DQ between a Conv
//                  and its residual Add): blocks the Conv+Add fusion
//   QK010 warning  Concat inputs with different scales: TensorRT inserts requantization
//   QK011 info     DQ feeds an op without an INT8 implementation: it runs in higher precision
//   QK012 warning  weighted op with a quantized input but a float weight (or the reverse):
//                  TensorRT runs it in higher precision
//   QK013 warning  no QuantizeLinear/DequantizeLinear at all: a float model, nothing to lint
//   QK014 info     an op quantkit's runtime lacks (a plugin?): its inputs and outputs were not
//                  checked by running the model's kernels
//   QK015-QK018    strongly typed networks (TensorRT 11): mixed float types at an op, Q/DQ type
//                  mismatches, a Cast after a DequantizeLinear, FP32 islands
//                  (analysis/typed_lint.h)
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

enum class Severity { kInfo = 0, kWarning = 1, kError = 2 };
const char* SeverityName(Severity s);

struct LintFinding {
  std::string rule;  // "QK001"
  Severity severity = Severity::kInfo;
  std::string node;
  std::string op_type;
  std::string message;  // what is wrong, naming tensors and values
  std::string why;      // what TensorRT does with it
  std::string fix;      // how to fix it
};

struct LintReport {
  std::vector<LintFinding> findings;
  int num_q = 0;
  int num_dq = 0;
  Severity Worst() const;
  int Count(Severity s) const;
};

LintReport LintQdqModel(const ir::Model& model);

// Loads `path` for linting: import, PromoteConstants and FoldIdentityOfConstants, then builds every
// kernel of quantkit's runtime so that a model which cannot run (bad attributes, impossible shapes)
// is an error naming the file and node (kInvalidModel), not "0 errors". Then LintQdqModel.
Result<LintReport> LintModelFile(const std::string& path);

// "error QK001 node 'x_Q' (QuantizeLinear): ... Why: ... Fix: ..." one finding per line.
std::string FormatLintText(const LintReport& report);
// Stable JSON: {"summary": {...}, "findings": [...]}.
std::string FormatLintJson(const LintReport& report);

}  // namespace quantkit::analysis
