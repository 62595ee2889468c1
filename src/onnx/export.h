// ONNX model export: ir::Model -> ModelProto (a file or bytes). The inverse of import.h: a model
// imported and exported again is semantically identical to the original (typed tensor fields
// come back as raw_data; "ai.onnx" domains as "").
//
// Files are written atomically (temp file + rename), the external-data file too, so a failed
// export leaves no partial output and a model can be written over the file it was read from.
// A model whose protobuf would exceed 2 GB fails with kResourceExhausted unless its large
// tensors go to external data.
#pragma once

#include <cstddef>
#include <string>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::onnx_io {

struct ExportOptions {
  // Write initializers of at least size_threshold bytes to one external-data file.
  bool external_data = false;
  size_t size_threshold = 1024;
  // External-data file, relative to the model's directory; default "<model file name>.data".
  std::string location;
};

// Byte alignment of each tensor in an external-data file (enough for any element type and for
// vectorised reads straight from the mapping).
constexpr size_t kExternalDataAlignment = 64;

Status ExportModel(const ir::Model& model, const std::string& path,
                   const ExportOptions& options = {});

// All tensors inline; options.external_data must be false.
Result<std::string> ExportModelToBytes(const ir::Model& model, const ExportOptions& options = {});

}  // namespace quantkit::onnx_io
