// TensorProto <-> ir::Tensor conversion (internal to src/onnx/).
//
// Import normalises every tensor to raw little-endian bytes, following the ONNX storage rules:
//   float_data   FLOAT, COMPLEX64 (two floats per element)
//   int32_data   INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16/BFLOAT16 and FLOAT8* (bit
//                patterns), INT4/UINT4/FLOAT4E2M1 (one byte = two packed elements per entry)
//   int64_data   INT64
//   double_data  DOUBLE, COMPLEX128 (two doubles per element)
//   uint64_data  UINT32, UINT64
//   string_data  STRING
// raw_data is taken over without a copy; external data is memory-mapped and bounds-checked.
// Export always writes raw_data (strings: string_data), or external data when asked.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::onnx_io {

// Where external data may be read from while importing one model.
struct ExternalDataContext {
  std::string base_dir;  // directory of the model file; empty: external data not allowed
  bool load = true;      // false: external tensors are rejected (kUnsupported)
  std::map<std::string, std::shared_ptr<const ir::Buffer>> files;  // mapped once per location
};

// Converts `proto` (whose raw_data may be moved out) into a tensor. `what` names the tensor's
// role for messages, e.g. "initializer 'w'".
Result<ir::Tensor> TensorFromProto(::onnx::TensorProto* proto, ExternalDataContext* ctx,
                                   const std::string& what);
Result<ir::SparseTensor> SparseTensorFromProto(::onnx::SparseTensorProto* proto,
                                               ExternalDataContext* ctx, const std::string& what);

// Fills `proto` with the tensor's metadata and inline bytes (raw_data / string_data).
void TensorToProto(const ir::Tensor& tensor, ::onnx::TensorProto* proto);
// Fills `proto` with metadata only and records the bytes as external data at
// (location, offset, nbytes).
void TensorToExternalProto(const ir::Tensor& tensor, const std::string& location, uint64_t offset,
                           ::onnx::TensorProto* proto);
void SparseTensorToProto(const ir::SparseTensor& tensor, ::onnx::SparseTensorProto* proto);

// IR-10 fields that libonnx 1.12's onnx.proto lacks arrive as unknown fields. These helpers read
// and write repeated StringStringEntryProto / string fields by number.
ir::StringPairs ReadUnknownStringPairs(const google::protobuf::UnknownFieldSet& fields, int number);
std::string ReadUnknownString(const google::protobuf::UnknownFieldSet& fields, int number);
void WriteUnknownStringPairs(const ir::StringPairs& pairs, int number,
                             google::protobuf::UnknownFieldSet* fields);

// Field numbers in onnx.proto of IR version 10 that libonnx 1.12 does not know.
constexpr int kValueInfoMetadataProps = 4;
constexpr int kNodeOverload = 8;
constexpr int kNodeMetadataProps = 9;
constexpr int kGraphMetadataProps = 16;
constexpr int kTensorMetadataProps = 16;

}  // namespace quantkit::onnx_io
