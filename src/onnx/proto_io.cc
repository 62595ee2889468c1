#include "onnx/proto_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/check.h"

namespace quantkit::onnx_io {
namespace {

// The ONNX messages that can nest without bound, and the fields that lead from one to another:
// subgraphs (Graph -> Node -> Attribute -> Graph), function bodies and types (sequence of
// sequence of ...). Every other field is skipped.
enum class Msg {
  kOther,
  kModel,
  kGraph,
  kNode,
  kAttribute,
  kFunction,
  kValueInfo,
  kType,
  kTypeElem,
  kTypeMap
};

Msg ChildOf(Msg parent, uint32_t field) {
  switch (parent) {
    case Msg::kModel:
      return field == 7 ? Msg::kGraph : field == 25 ? Msg::kFunction : Msg::kOther;
    case Msg::kGraph:
      if (field == 1) return Msg::kNode;
      return field == 11 || field == 12 || field == 13 ? Msg::kValueInfo : Msg::kOther;
    case Msg::kNode:
      return field == 5 ? Msg::kAttribute : Msg::kOther;
    case Msg::kAttribute:
      if (field == 6 || field == 11) return Msg::kGraph;
      return field == 14 || field == 15 ? Msg::kType : Msg::kOther;
    case Msg::kFunction:
      return field == 7 ? Msg::kNode : Msg::kOther;
    case Msg::kValueInfo:
      return field == 2 ? Msg::kType : Msg::kOther;
    case Msg::kType:  // sequence_type, optional_type: elem_type; map_type: value_type
      return field == 4 || field == 9 ? Msg::kTypeElem : field == 5 ? Msg::kTypeMap : Msg::kOther;
    case Msg::kTypeElem:
      return field == 1 ? Msg::kType : Msg::kOther;
    case Msg::kTypeMap:
      return field == 2 ? Msg::kType : Msg::kOther;
    case Msg::kOther:
      return Msg::kOther;
  }
  return Msg::kOther;
}

bool ReadVarint(const uint8_t* data, size_t size, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < size; shift += 7) {
    const uint8_t b = data[(*pos)++];
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

struct Nesting {
  int messages = 0;   // deepest message level along the paths above (the model is level 1)
  int subgraphs = 0;  // deepest graph inside a graph (If/Loop/Scan bodies)
};

// Walks the wire format iteratively (an explicit stack: the input may nest thousands deep),
// following only the fields of ChildOf. Stops quietly at the first malformed byte: it only
// explains a parse failure, it never accepts anything.
Nesting MeasureNesting(const uint8_t* data, size_t size) {
  struct Frame {
    Msg kind;
    size_t end;
    int graphs;
  };
  Nesting n;
  std::vector<Frame> stack{{Msg::kModel, size, 0}};
  size_t pos = 0;
  while (!stack.empty()) {
    n.messages = std::max(n.messages, static_cast<int>(stack.size()));
    Frame& top = stack.back();
    if (pos >= top.end) {
      pos = top.end;
      stack.pop_back();
      continue;
    }
    uint64_t key = 0, len = 0;
    if (!ReadVarint(data, top.end, &pos, &key)) break;
    switch (key & 7) {
      case 0:
        if (!ReadVarint(data, top.end, &pos, &len)) return n;
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2: {
        if (!ReadVarint(data, top.end, &pos, &len) || len > top.end - pos) return n;
        const Msg child = ChildOf(top.kind, static_cast<uint32_t>(key >> 3));
        if (child == Msg::kOther) {
          pos += len;
          break;
        }
        const int graphs =
            top.graphs + (child == Msg::kGraph && top.kind == Msg::kAttribute ? 1 : 0);
        n.subgraphs = std::max(n.subgraphs, graphs);
        stack.push_back({child, pos + static_cast<size_t>(len), graphs});
        break;
      }
      default:
        return n;  // groups (3, 4) and invalid wire types: not ONNX
    }
  }
  return n;
}

}  // namespace

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
  if (proto->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage()) return Status::Ok();
  // protobuf says only "failed"; a model nested deeper than the limit is not corrupt: say so.
  const Nesting nesting = MeasureNesting(data, size);
  // The walk skips the last few levels under a graph (a tensor attribute, a shape's dimensions).
  constexpr int kUnwalkedLevels = 4;
  QK_RETURN_IF_NOT(
      nesting.messages + kUnwalkedLevels <= kMaxProtoRecursion, StatusCode::kUnsupported,
      "the model nests {} protobuf messages deep ({} levels of subgraphs in subgraphs: If/Loop/Scan "
      "bodies); quantkit reads at most {} levels (kMaxProtoRecursion: about {} nested subgraphs)",
      nesting.messages, nesting.subgraphs, kMaxProtoRecursion, kMaxSubgraphNesting);
  return MakeStatus(StatusCode::kInvalidModel,
                    "not a valid ONNX protobuf (truncated, corrupt or not an ONNX file)");
}

}  // namespace quantkit::onnx_io
