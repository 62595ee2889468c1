// Reading a serialized TensorProto file (the ONNX backend tests' input_N.pb / output_N.pb).
#pragma once

#include <string>

#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::onnx_io {

// Parses one TensorProto from `path` (kNotFound, kIoError, kInvalidModel). The tensor's name
// is the proto's name. Sequence/optional protos are not TensorProtos and fail as kInvalidModel
// or yield an undefined dtype (kUnsupported).
Result<ir::Tensor> ReadTensorProtoFile(const std::string& path);

}  // namespace quantkit::onnx_io
