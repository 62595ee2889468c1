// Opset upgrade at import: a model whose default-domain opset is below what quantization needs
// (Q/DQ with a per-channel axis needs opset 13) is converted with libonnx's own version converter
// (onnx::version_conversion::ConvertVersion, the C++ core of onnx.version_converter), then
// imported. Exporters of deployed models (paddle2onnx, older torch.onnx, tf2onnx) still write opset
// 9-12; the converter's adapters rewrite what changed (Softmax/LogSoftmax axis semantics, Split and
// the Reduce* axes attributes, Upsample -> Resize, Pad/Clip/Slice attributes -> inputs, ...) so
// the upgraded model computes the same function.
//
// Guarantees: the input file is never modified; a model already at or above `min_opset` is
// imported unchanged (upgrade.from == upgrade.to); value names of the original graph are kept
// (adapters may add nodes and values of their own). Errors: kUnsupported when the converter
// has no adapter for an op of the model or the model keeps tensors in external data (the
// converter would drop them), naming the file and the converter's reason; never throws.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "onnx/import.h"
#include "quantkit/status.h"

namespace quantkit::onnx_io {

struct OpsetUpgrade {
  int64_t from = 0;  // default-domain opset of the file
  int64_t to = 0;    // default-domain opset of the imported model (== from: not upgraded)
  bool upgraded() const { return to != from; }
};

// Imports `path`, first upgrading it to `min_opset` when its default-domain opset is lower.
Result<ir::Model> ImportModelAtLeastOpset(const std::string& path, int64_t min_opset,
                                          OpsetUpgrade* upgrade, const ImportOptions& options = {});

}  // namespace quantkit::onnx_io
