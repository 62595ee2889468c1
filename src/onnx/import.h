// ONNX model import: ModelProto (a file or bytes) -> ir::Model.
//
// Guarantees:
//  - every field of the model survives (see export.h for the way back): graphs and subgraphs,
//    attributes, value_info, doc strings, metadata, sparse initializers, typed tensor fields
//    (normalised to raw bytes), IR-10 fields unknown to libonnx 1.12 (node overload,
//    metadata_props on nodes/graphs/values/tensors); functions and training_info are kept as
//    serialized bytes; other domains' nodes are passed through untouched.
//  - external data is memory-mapped, never copied; locations must stay inside the model
//    directory and every offset/length is checked against the file size before use.
//  - names used in a subgraph but defined in an enclosing graph become outer-scope captures.
//  - the result passes ir::Verify (unless options.verify is false).
// Errors are one line naming the file, then the node/tensor and the reason:
//   kInvalidModel (corrupt protobuf, not ONNX, SSA violation, undefined value, cycle, unknown
//   dtype, bad external data), kNotFound (model or external-data file missing), kUnsupported
//   (IR version outside 3..10, segmented tensors).
// Never aborts, never throws.
#pragma once

#include <cstddef>
#include <string>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::onnx_io {

// IR versions this importer reads (ONNX 1.2 .. 1.16+).
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 10;
// ai.onnx opsets above 21 (ONNX 1.16, the node tests the runtime is checked against) are refused
// at import: a newer opset may redefine ops that the runtime and the passes would misread.

struct ImportOptions {
  // Map external-data files. When false, a model with external tensors fails (kUnsupported).
  bool load_external_data = true;
  // Directory external-data locations are relative to. ImportModel uses the model's directory
  // when this is empty; ImportModelFromBytes rejects external data when it is empty.
  std::string base_dir;
  // Run ir::Verify on the result.
  bool verify = true;
};

Result<ir::Model> ImportModel(const std::string& path, const ImportOptions& options = {});

// `name` is used in messages in place of a file name.
Result<ir::Model> ImportModelFromBytes(const void* data, size_t size,
                                       const ImportOptions& options = {},
                                       const std::string& name = "<memory>");
inline Result<ir::Model> ImportModelFromBytes(const std::string& bytes,
                                              const ImportOptions& options = {},
                                              const std::string& name = "<memory>") {
  return ImportModelFromBytes(bytes.data(), bytes.size(), options, name);
}

}  // namespace quantkit::onnx_io
