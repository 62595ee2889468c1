// Default-domain opset upgrade of a parsed ModelProto with libonnx's version converter.
#include "onnx/opset_upgrade.h"

#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
#include <new>

#include "common/check.h"
#include "onnx/proto_io.h"

namespace quantkit::onnx_io::internal {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t DefaultOpset(const ::onnx::ModelProto& proto) {
  for (const auto& op : proto.opset_import()) {
    if (IsDefaultDomain(op.domain())) return op.version();
  }
  return -1;
}

}  // namespace

Status UpgradeProtoOpset(::onnx::ModelProto* proto, int64_t min_opset, OpsetUpgrade* upgrade) {
  const int64_t from = DefaultOpset(*proto);
  upgrade->from = upgrade->to = from;
  // No default-domain import at all: nothing the converter could upgrade.
  if (from < 0 || from >= min_opset) return Status::Ok();
  for (const auto& init : proto->graph().initializer()) {
    QK_RETURN_IF_NOT(init.data_location() != ::onnx::TensorProto::EXTERNAL, StatusCode::kUnsupported,
                     "opset {} needs an upgrade to {}, which is not done for models with external "
                     "data (initializer '{}'); upgrade it first (python -m onnx.version_converter)",
                     from, min_opset, init.name());
  }
  try {
    // Adapters such as Softmax 12 -> 13 need the input's rank; the converter reads it from
    // value_info, which exporters often leave out. Shape inference fills it (best effort: a
    // model it cannot fully infer is still converted where the adapters need no shapes), with
    // data propagation for the Shape -> Slice -> Concat -> Reshape chains of paddle2onnx exports.
    ::onnx::ModelProto inferred = *proto;
    try {
      ::onnx::ShapeInferenceOptions infer_options(/*check_type_val=*/false, /*strict_mode_val=*/0,
                                                  /*data_prop_val=*/true);
      ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(), infer_options);
    } catch (const std::exception&) {
      inferred = *proto;
    }
    ::onnx::ModelProto converted =
        ::onnx::version_conversion::ConvertVersion(inferred, static_cast<int>(min_opset));
    QK_RETURN_IF_NOT(DefaultOpset(converted) == min_opset, StatusCode::kUnsupported,
                     "onnx version converter left the model at opset {} (asked {})",
                     DefaultOpset(converted), min_opset);
    proto->Swap(&converted);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "out of memory upgrading opset {} to {}", from,
                      min_opset);
  } catch (const std::exception& e) {
    // The converter throws for ops without an adapter on the way (its message names the op).
    return MakeStatus(StatusCode::kUnsupported,
                      "cannot upgrade opset {} to {} with the onnx version converter: {}", from,
                      min_opset, e.what());
  }
  upgrade->to = min_opset;
  return Status::Ok();
}

}  // namespace quantkit::onnx_io::internal
