// Parsing and serializing ModelProto with explicit limits (internal to src/onnx/).
#pragma once

#include <cstddef>
#include <cstdint>

#include <onnx/onnx_pb.h>

#include "quantkit/status.h"

namespace quantkit::onnx_io {

// protobuf cannot represent a message of 2 GiB or more; larger models need external data.
constexpr uint64_t kMaxProtoBytes = (uint64_t{1} << 31) - 1;
// Nesting depth of protobuf messages accepted; a subgraph costs about 4 levels
// (Node -> Attribute -> Graph -> Node), so this allows about 20 nested If/Loop bodies while
// keeping hostile inputs from exhausting the stack in the parser and the importer.
constexpr int kMaxProtoRecursion = 100;

// Parses `size` bytes into `proto`. kInvalidModel for a truncated or corrupt message,
// kResourceExhausted for a buffer over kMaxProtoBytes. protobuf's own log output is silenced
// (errors are reported once, as a Status).
Status ParseModelProto(const uint8_t* data, size_t size, ::onnx::ModelProto* proto);

struct OpsetUpgrade;
namespace internal {
// Upgrades `proto` in place to default-domain opset `min_opset` when it is lower (opset_upgrade.h).
Status UpgradeProtoOpset(::onnx::ModelProto* proto, int64_t min_opset, OpsetUpgrade* upgrade);
}  // namespace internal

}  // namespace quantkit::onnx_io
