#include "onnx/proto_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <mutex>

#include "common/check.h"

namespace quantkit::onnx_io {

Status ParseModelProto(const uint8_t* data, size_t size, ::onnx::ModelProto* proto) {
  // protobuf logs parse problems to stderr; quantkit reports exactly one line per failure, so
  // the library's log is discarded (a null handler discards, per stubs/logging.h).
  static std::once_flag silence_once;
  std::call_once(silence_once, [] { google::protobuf::SetLogHandler(nullptr); });

  QK_RETURN_IF_NOT(size <= kMaxProtoBytes, StatusCode::kResourceExhausted,
                   "the model protobuf is {} bytes, over protobuf's 2 GB limit (large weights "
                   "must be stored as external data)",
                   size);
  google::protobuf::io::ArrayInputStream input(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  coded.SetRecursionLimit(kMaxProtoRecursion);
  QK_RETURN_IF_NOT(proto->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage(),
                   StatusCode::kInvalidModel,
                   "not a valid ONNX protobuf (truncated, corrupt or not an ONNX file)");
  return Status::Ok();
}

}  // namespace quantkit::onnx_io
