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

bool HasKnownRank(const ::onnx::GraphProto& graph, const std::string& name) {
  auto known = [&](const auto& values) {
    for (const auto& v : values) {
      if (v.name() == name && v.type().tensor_type().has_shape()) return true;
    }
    return false;
  };
  for (const auto& init : graph.initializer()) {
    if (init.name() == name) return true;
  }
  return known(graph.input()) || known(graph.value_info()) || known(graph.output());
}

// Before opset 13, Softmax/LogSoftmax/Hardmax normalise over the input flattened to 2-D at
// `axis`; libonnx 1.12's 12->13 adapter needs the input's rank to rewrite that and aborts when
// shape inference cannot give it (Reshape targets computed by Shape -> Slice -> Concat, as in
// paddle2onnx exports). Where the rank is unknown, spell the old semantics out first:
//   y = Softmax<axis=k>(x)  ->  y = Reshape(Softmax<axis=1>(Flatten<axis=k>(x)), Shape(x))
// which computes the same values at every opset; the flattened value is declared rank 2, so
// the adapter only has to turn axis 1 of a 2-D input into axis -1.
void SpellOutFlattenedNormalisations(::onnx::GraphProto* graph) {
  ::google::protobuf::RepeatedPtrField<::onnx::NodeProto> rewritten;
  for (const ::onnx::NodeProto& node : graph->node()) {
    const std::string& op = node.op_type();
    const bool normalisation = op == "Softmax" || op == "LogSoftmax" || op == "Hardmax";
    if (!normalisation || !IsDefaultDomain(node.domain()) || node.input_size() != 1 ||
        node.output_size() != 1 || HasKnownRank(*graph, node.input(0))) {
      *rewritten.Add() = node;
      continue;
    }
    int64_t axis = 1;  // the default before opset 13
    for (const auto& a : node.attribute()) {
      if (a.name() == "axis") axis = a.i();
    }
    const std::string& x = node.input(0);
    const std::string& y = node.output(0);
    const std::string flat = y + "/qk_flatten", soft = y + "/qk_2d", shape = y + "/qk_shape";
    ::onnx::NodeProto* f = rewritten.Add();
    f->set_op_type("Flatten");
    f->set_name(node.name() + "/qk_flatten");
    f->add_input(x);
    f->add_output(flat);
    auto* fa = f->add_attribute();
    fa->set_name("axis");
    fa->set_type(::onnx::AttributeProto::INT);
    fa->set_i(axis);
    ::onnx::NodeProto* s = rewritten.Add();
    *s = node;
    s->set_input(0, flat);
    s->set_output(0, soft);
    s->clear_attribute();
    auto* sa = s->add_attribute();
    sa->set_name("axis");
    sa->set_type(::onnx::AttributeProto::INT);
    sa->set_i(1);
    ::onnx::NodeProto* sh = rewritten.Add();
    sh->set_op_type("Shape");
    sh->set_name(node.name() + "/qk_shape");
    sh->add_input(x);
    sh->add_output(shape);
    ::onnx::NodeProto* r = rewritten.Add();
    r->set_op_type("Reshape");
    r->set_name(node.name() + "/qk_reshape");
    r->add_input(soft);
    r->add_input(shape);
    r->add_output(y);
    // Rank 2, dims unknown: all the adapter needs.
    ::onnx::ValueInfoProto* vi = graph->add_value_info();
    vi->set_name(flat);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim();
    tt->mutable_shape()->add_dim();
  }
  graph->mutable_node()->Swap(&rewritten);
}

}  // namespace

Status UpgradeProtoOpset(::onnx::ModelProto* proto, int64_t min_opset, OpsetUpgrade* upgrade) {
  const int64_t from = DefaultOpset(*proto);
  upgrade->from = upgrade->to = from;
  // No default-domain import at all: nothing the converter could upgrade.
  if (from < 0 || from >= min_opset) return Status::Ok();
  for (const auto& init : proto->graph().initializer()) {
    QK_RETURN_IF_NOT(init.data_location() != ::onnx::TensorProto::EXTERNAL,
                     StatusCode::kUnsupported,
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
      ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(),
                                           infer_options);
    } catch (const std::exception&) {
      inferred = *proto;
    }
    SpellOutFlattenedNormalisations(inferred.mutable_graph());
    ::onnx::ModelProto converted =
        ::onnx::version_conversion::ConvertVersion(inferred, static_cast<int>(min_opset));
    QK_RETURN_IF_NOT(DefaultOpset(converted) == min_opset, StatusCode::kUnsupported,
                     "onnx version converter left the model at opset {} (asked {})",
                     DefaultOpset(converted), min_opset);
    proto->Swap(&converted);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "out of memory upgrading opset {} to {}",
                      from, min_opset);
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
