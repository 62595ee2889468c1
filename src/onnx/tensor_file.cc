#include "onnx/tensor_file.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "common/check.h"
#include "common/file_util.h"
#include "onnx/proto_io.h"
#include "onnx/tensor_proto.h"

namespace quantkit::onnx_io {

Result<ir::Tensor> ReadTensorProtoFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  if (bytes.size() > kMaxProtoBytes) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: {} bytes exceeds the protobuf limit",
                      path, bytes.size());
  }
  ::onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return MakeStatus(StatusCode::kInvalidModel, "{}: not a TensorProto", path);
  }
  if (proto.data_type() == 0) {
    return MakeStatus(StatusCode::kUnsupported, "{}: tensor has no data type (sequence/optional?)",
                      path);
  }
  // External data is not allowed for standalone tensor files (no base directory).
  ExternalDataContext ctx;
  ctx.load = false;
  try {
    return TensorFromProto(&proto, &ctx, path);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: tensor too large", path);
  }
}

}  // namespace quantkit::onnx_io
