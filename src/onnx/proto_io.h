// Parsing and serializing ModelProto with explicit limits (internal to src/onnx/).
#pragma once

#include <cstddef>
#include <cstdint>

#include <onnx/onnx_pb.h>

#include "quantkit/status.h"

namespace quantkit::onnx_io {

// protobuf cannot represent a message of 2 GiB or more; larger models need external data.
constexpr uint64_t kMaxProtoBytes = (uint64_t{1} << 31) - 1;
// Nesting depth of protobuf messages accepted; a subgraph costs 3 levels (Graph -> Node ->
// Attribute -> Graph), so this allows about 30 nested If/Loop/Scan bodies while keeping hostile
// inputs from exhausting the stack in the parser and the importer.
constexpr int kMaxProtoRecursion = 100;
// The subgraph nesting that fits in kMaxProtoRecursion (Model, Graph, then 3 levels per subgraph,
// and a few for the deepest graph's attributes, tensors and types), as messages state it.
constexpr int kMaxSubgraphNesting = (kMaxProtoRecursion - 8) / 3;

// Parses `size` bytes into `proto`. kInvalidModel for a truncated or corrupt message,
// kUnsupported (naming the depth and the limit) for one nested deeper than kMaxProtoRecursion,
// kResourceExhausted for a buffer over kMaxProtoBytes. protobuf's own log output is silenced
// (errors are reported once, as a Status).
Status ParseModelProto(const uint8_t* data, size_t size, ::onnx::ModelProto* proto);

struct OpsetUpgrade;
namespace internal {
// Upgrades `proto` in place to default-domain opset `min_opset` when it is lower (opset_upgrade.h).
Status UpgradeProtoOpset(::onnx::ModelProto* proto, int64_t min_opset, OpsetUpgrade* upgrade);
}  // namespace internal

}  // namespace quantkit::onnx_io
