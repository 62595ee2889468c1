#include "onnx/import.h"
#include "onnx/opset_upgrade.h"

#include <new>
#include <unordered_set>

#include "common/check.h"
#include "common/file_util.h"
#include "ir/verifier.h"
#include "onnx/proto_io.h"
#include "onnx/tensor_proto.h"

namespace quantkit::onnx_io {

// Newest ai.onnx opset quantkit knows (see import.h).
constexpr int64_t kMaxDefaultOpset = 21;
namespace {

using ir::AttrType;

class Importer {
 public:
  explicit Importer(ExternalDataContext* ctx) : ctx_(ctx) {}

  Status ImportModel(::onnx::ModelProto* proto, ir::Model* model);

 private:
  Status ImportGraph(::onnx::GraphProto* proto, ir::Graph* graph);
  Status ImportValueInfo(const ::onnx::ValueInfoProto& proto, ir::Value* value);
  Status ImportNode(::onnx::NodeProto* proto, ir::Graph* graph);
  Status ImportAttribute(::onnx::AttributeProto* proto, ir::Graph* owner, const std::string& where,
                         ir::Attribute* out);
  Result<ir::TypeInfo> ImportType(const ::onnx::TypeProto& proto, const std::string& what);

  ExternalDataContext* ctx_;
};

Result<ir::TypeInfo> Importer::ImportType(const ::onnx::TypeProto& proto, const std::string& what) {
  ir::TypeInfo type;
  type.denotation = proto.denotation();
  const ::onnx::TypeProto::Tensor* tensor = nullptr;
  switch (proto.value_case()) {
    case ::onnx::TypeProto::kTensorType:
      type.kind = ir::TypeInfo::Kind::kTensor;
      tensor = &proto.tensor_type();
      break;
    case ::onnx::TypeProto::kSparseTensorType:
      type.kind = ir::TypeInfo::Kind::kSparseTensor;
      // Same layout as TypeProto.Tensor (elem_type = 1, shape = 2).
      break;
    case ::onnx::TypeProto::VALUE_NOT_SET:
      type.kind = proto.has_denotation() ? ir::TypeInfo::Kind::kOther : ir::TypeInfo::Kind::kNone;
      if (type.kind == ir::TypeInfo::Kind::kOther) type.opaque = proto.SerializeAsString();
      return type;
    default:
      // Sequences, maps, optionals, opaque: kept verbatim.
      type.kind = ir::TypeInfo::Kind::kOther;
      type.opaque = proto.SerializeAsString();
      return type;
  }
  const int32_t elem_type = tensor ? tensor->elem_type() : proto.sparse_tensor_type().elem_type();
  const bool has_shape = tensor ? tensor->has_shape() : proto.sparse_tensor_type().has_shape();
  const ::onnx::TensorShapeProto& shape =
      tensor ? tensor->shape() : proto.sparse_tensor_type().shape();
  QK_RETURN_IF_NOT(elem_type == 0 || ir::IsKnownDType(elem_type), StatusCode::kInvalidModel,
                   "{}: unknown elem_type {}", what, elem_type);
  type.dtype = static_cast<ir::DType>(elem_type);
  type.has_shape = has_shape;
  for (const auto& d : shape.dim()) {
    ir::Dim dim;
    if (d.value_case() == ::onnx::TensorShapeProto::Dimension::kDimValue) {
      dim.value = d.dim_value();
    } else if (d.value_case() == ::onnx::TensorShapeProto::Dimension::kDimParam) {
      dim.param = d.dim_param();
    }
    dim.denotation = d.denotation();
    type.dims.push_back(std::move(dim));
  }
  return type;
}

Status Importer::ImportValueInfo(const ::onnx::ValueInfoProto& proto, ir::Value* value) {
  if (proto.has_type()) {
    QK_ASSIGN_OR_RETURN(value->type, ImportType(proto.type(), "value '" + proto.name() + "'"));
  }
  if (proto.has_doc_string()) value->doc_string = proto.doc_string();
  ir::StringPairs props = ReadUnknownStringPairs(proto.unknown_fields(), kValueInfoMetadataProps);
  if (!props.empty()) value->metadata_props = std::move(props);
  return Status::Ok();
}

Status Importer::ImportAttribute(::onnx::AttributeProto* proto, ir::Graph* owner,
                                 const std::string& where, ir::Attribute* out) {
  out->name = proto->name();
  out->doc_string = proto->doc_string();
  out->ref_attr_name = proto->ref_attr_name();
  int type = proto->type();
  if (type == 0) {
    // IR < 4 files may omit the type; ONNX defines it by the field that is set.
    if (proto->has_f())
      type = ::onnx::AttributeProto::FLOAT;
    else if (proto->has_i())
      type = ::onnx::AttributeProto::INT;
    else if (proto->has_s())
      type = ::onnx::AttributeProto::STRING;
    else if (proto->has_t())
      type = ::onnx::AttributeProto::TENSOR;
    else if (proto->has_g())
      type = ::onnx::AttributeProto::GRAPH;
    else if (proto->has_sparse_tensor())
      type = ::onnx::AttributeProto::SPARSE_TENSOR;
    else if (proto->has_tp())
      type = ::onnx::AttributeProto::TYPE_PROTO;
    else if (proto->floats_size())
      type = ::onnx::AttributeProto::FLOATS;
    else if (proto->ints_size())
      type = ::onnx::AttributeProto::INTS;
    else if (proto->strings_size())
      type = ::onnx::AttributeProto::STRINGS;
    else if (proto->tensors_size())
      type = ::onnx::AttributeProto::TENSORS;
    else if (proto->graphs_size())
      type = ::onnx::AttributeProto::GRAPHS;
    else if (proto->sparse_tensors_size())
      type = ::onnx::AttributeProto::SPARSE_TENSORS;
    else if (proto->type_protos_size())
      type = ::onnx::AttributeProto::TYPE_PROTOS;
  }
  const std::string what = where + ": attribute '" + proto->name() + "'";
  out->type = static_cast<AttrType>(type);
  auto import_graph = [&](::onnx::GraphProto* g) -> Status {
    auto sub = std::make_unique<ir::Graph>(owner);
    QK_RETURN_IF_ERROR(ImportGraph(g, sub.get()));
    out->graphs.push_back(std::move(sub));
    return Status::Ok();
  };
  switch (out->type) {
    case AttrType::kFloat:
      out->f = proto->f();
      break;
    case AttrType::kInt:
      out->i = proto->i();
      break;
    case AttrType::kString:
      out->s = proto->s();
      break;
    case AttrType::kTensor: {
      QK_ASSIGN_OR_RETURN(out->t, TensorFromProto(proto->mutable_t(), ctx_, what));
      break;
    }
    case AttrType::kGraph:
      QK_RETURN_IF_ERROR(import_graph(proto->mutable_g()));
      break;
    case AttrType::kSparseTensor: {
      QK_ASSIGN_OR_RETURN(ir::SparseTensor s,
                          SparseTensorFromProto(proto->mutable_sparse_tensor(), ctx_, what));
      out->sparse_tensors.push_back(std::move(s));
      break;
    }
    case AttrType::kTypeProto:
      out->type_protos.push_back(proto->tp().SerializeAsString());
      break;
    case AttrType::kFloats:
      out->floats.assign(proto->floats().begin(), proto->floats().end());
      break;
    case AttrType::kInts:
      out->ints.assign(proto->ints().begin(), proto->ints().end());
      break;
    case AttrType::kStrings:
      out->strings.assign(proto->strings().begin(), proto->strings().end());
      break;
    case AttrType::kTensors:
      for (auto& t : *proto->mutable_tensors()) {
        QK_ASSIGN_OR_RETURN(ir::Tensor tensor, TensorFromProto(&t, ctx_, what));
        out->tensors.push_back(std::move(tensor));
      }
      break;
    case AttrType::kGraphs:
      for (auto& g : *proto->mutable_graphs()) QK_RETURN_IF_ERROR(import_graph(&g));
      break;
    case AttrType::kSparseTensors:
      for (auto& t : *proto->mutable_sparse_tensors()) {
        QK_ASSIGN_OR_RETURN(ir::SparseTensor s, SparseTensorFromProto(&t, ctx_, what));
        out->sparse_tensors.push_back(std::move(s));
      }
      break;
    case AttrType::kTypeProtos:
      for (const auto& tp : proto->type_protos())
        out->type_protos.push_back(tp.SerializeAsString());
      break;
    case AttrType::kUndefined:
    default:
      return MakeStatus(StatusCode::kInvalidModel, "{}: unknown attribute type {}", what, type);
  }
  return Status::Ok();
}

Status Importer::ImportNode(::onnx::NodeProto* proto, ir::Graph* graph) {
  const std::string where = fmt::format("node '{}' ({})", proto->name(), proto->op_type());
  std::vector<ir::Value*> inputs;
  inputs.reserve(static_cast<size_t>(proto->input_size()));
  for (const std::string& name : proto->input()) {
    inputs.push_back(name.empty() ? nullptr : graph->GetOrCreateValue(name));
  }
  std::vector<std::string> outputs(proto->output().begin(), proto->output().end());
  // Graph::AddNode checks outputs against other definitions; repeats within the node are
  // checked here (they would silently alias one value).
  std::unordered_set<std::string> seen;
  for (const std::string& name : outputs) {
    QK_RETURN_IF_NOT(name.empty() || seen.insert(name).second, StatusCode::kInvalidModel,
                     "{}: output '{}' is listed twice (values must have exactly one producer)",
                     where, name);
  }
  QK_ASSIGN_OR_RETURN(ir::Node * node, graph->AddNode(proto->op_type(), inputs, outputs,
                                                      proto->domain(), proto->name()));
  node->doc_string = proto->doc_string();
  node->overload = ReadUnknownString(proto->unknown_fields(), kNodeOverload);
  node->metadata_props = ReadUnknownStringPairs(proto->unknown_fields(), kNodeMetadataProps);
  for (auto& attr_proto : *proto->mutable_attribute()) {
    ir::Attribute attr;
    QK_RETURN_IF_ERROR(ImportAttribute(&attr_proto, graph, where, &attr));
    node->attributes().push_back(std::move(attr));
  }
  return Status::Ok();
}

Status Importer::ImportGraph(::onnx::GraphProto* proto, ir::Graph* graph) {
  graph->name = proto->name();
  graph->doc_string = proto->doc_string();
  graph->metadata_props = ReadUnknownStringPairs(proto->unknown_fields(), kGraphMetadataProps);
  for (const auto& annotation : proto->quantization_annotation()) {
    graph->quantization_annotations.push_back(annotation.SerializeAsString());
  }
  const std::string where = "graph '" + proto->name() + "'";
  for (const auto& in : proto->input()) {
    QK_RETURN_IF_NOT(!in.name().empty(), StatusCode::kInvalidModel, "{}: input without a name",
                     where);
    QK_RETURN_IF_NOT(!graph->FindValue(in.name()), StatusCode::kInvalidModel,
                     "{}: input '{}' is listed twice", where, in.name());
    ir::Value* v = graph->CreateValue(in.name());
    QK_RETURN_IF_ERROR(ImportValueInfo(in, v));
    graph->AddInput(v);
  }
  for (auto& init : *proto->mutable_initializer()) {
    const std::string name = init.name();
    QK_RETURN_IF_NOT(!name.empty(), StatusCode::kInvalidModel, "{}: initializer without a name",
                     where);
    const ir::Value* existing = graph->FindValue(name);
    QK_RETURN_IF_NOT(!existing || !existing->is_initializer(), StatusCode::kInvalidModel,
                     "{}: initializer '{}' is defined twice", where, name);
    QK_ASSIGN_OR_RETURN(ir::Tensor t, TensorFromProto(&init, ctx_, "initializer '" + name + "'"));
    graph->AddInitializer(name, std::move(t));
  }
  for (auto& sparse : *proto->mutable_sparse_initializer()) {
    // A sparse initializer is named by its values tensor.
    const std::string name = sparse.values().name();
    QK_RETURN_IF_NOT(!name.empty(), StatusCode::kInvalidModel,
                     "{}: sparse initializer without a name", where);
    const ir::Value* existing = graph->FindValue(name);
    QK_RETURN_IF_NOT(!existing || !existing->is_initializer(), StatusCode::kInvalidModel,
                     "{}: initializer '{}' is defined twice", where, name);
    QK_ASSIGN_OR_RETURN(ir::SparseTensor s,
                        SparseTensorFromProto(&sparse, ctx_, "sparse initializer '" + name + "'"));
    graph->AddSparseInitializer(name, std::make_shared<ir::SparseTensor>(std::move(s)));
  }
  for (const auto& info : proto->value_info()) {
    QK_RETURN_IF_NOT(!info.name().empty(), StatusCode::kInvalidModel,
                     "{}: value_info without a name", where);
    ir::Value* v = graph->GetOrCreateValue(info.name());
    QK_RETURN_IF_ERROR(ImportValueInfo(info, v));
    v->has_value_info = true;
  }
  for (auto& node : *proto->mutable_node()) QK_RETURN_IF_ERROR(ImportNode(&node, graph));
  for (const auto& out : proto->output()) {
    QK_RETURN_IF_NOT(!out.name().empty(), StatusCode::kInvalidModel, "{}: output without a name",
                     where);
    ir::Value* v = graph->GetOrCreateValue(out.name());
    // An output's ValueInfo is its declaration; it may repeat a value_info entry.
    const bool had_value_info = v->has_value_info;
    QK_RETURN_IF_ERROR(ImportValueInfo(out, v));
    v->has_value_info = had_value_info;
    graph->AddOutput(v);
  }
  return Status::Ok();
}

// Values a subgraph uses without defining them, and that an enclosing graph defines, are
// captures (ONNX lexical scoping).
bool DefinedInAncestor(const ir::Graph* graph, const std::string& name) {
  for (const ir::Graph* g = graph->parent(); g; g = g->parent()) {
    const ir::Value* v = g->FindValue(name);
    if (v && (v->producer() || v->is_graph_input() || v->is_initializer())) return true;
  }
  return false;
}

void MarkCaptures(ir::Graph& root) {
  ir::ForEachGraph(root, [](ir::Graph& g) {
    if (!g.parent()) return;
    for (ir::Value* v : g.values()) {
      if (v->producer() || v->is_graph_input() || v->is_initializer()) continue;
      if (DefinedInAncestor(&g, v->name())) g.MarkOuterScope(v);
    }
  });
}

Status Importer::ImportModel(::onnx::ModelProto* proto, ir::Model* model) {
  QK_RETURN_IF_NOT(proto->has_ir_version() && proto->has_graph(), StatusCode::kInvalidModel,
                   "not an ONNX model (no ir_version or no graph)");
  QK_RETURN_IF_NOT(proto->ir_version() >= kMinIrVersion && proto->ir_version() <= kMaxIrVersion,
                   StatusCode::kUnsupported, "IR version {} is not supported (supported: {}..{})",
                   proto->ir_version(), kMinIrVersion, kMaxIrVersion);
  model->ir_version = proto->ir_version();
  for (const auto& opset : proto->opset_import()) {
    const std::string domain = ir::CanonicalDomain(opset.domain());
    QK_RETURN_IF_NOT(
        !domain.empty() || (opset.version() >= 1 && opset.version() <= kMaxDefaultOpset),
        StatusCode::kUnsupported, "opset {} of ai.onnx is not supported (supported: 1..{})",
        opset.version(), kMaxDefaultOpset);
    model->opset_imports.push_back(ir::OpsetImport{domain, opset.version()});
  }
  model->producer_name = proto->producer_name();
  model->producer_version = proto->producer_version();
  model->domain = proto->domain();
  model->model_version = proto->model_version();
  model->doc_string = proto->doc_string();
  for (const auto& p : proto->metadata_props())
    model->metadata_props.emplace_back(p.key(), p.value());
  for (const auto& f : proto->functions()) model->functions.push_back(f.SerializeAsString());
  for (const auto& t : proto->training_info())
    model->training_info.push_back(t.SerializeAsString());
  QK_RETURN_IF_ERROR(ImportGraph(proto->mutable_graph(), model->graph.get()));
  MarkCaptures(*model->graph);
  return Status::Ok();
}

Result<ir::Model> ImportParsed(::onnx::ModelProto* proto, ExternalDataContext* ctx,
                               const ImportOptions& options) {
  ir::Model model;
  Importer importer(ctx);
  QK_RETURN_IF_ERROR(importer.ImportModel(proto, &model));
  if (options.verify) QK_RETURN_IF_ERROR(ir::Verify(model));
  return model;
}

// Runs `fn` and turns escaped exceptions into a Status: a public API never throws.
template <typename Fn>
Result<ir::Model> Guarded(const std::string& name, Fn&& fn) {
  try {
    Result<ir::Model> result = fn();
    if (!result.ok()) return result.status().WithContext(name);
    return result;
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: out of memory while importing", name);
  } catch (const std::exception& e) {
    return MakeStatus(StatusCode::kInternal, "{}: internal error while importing: {}", name,
                      e.what());
  }
}

}  // namespace

namespace {

// Maps and parses `path`, upgrades its opset when `upgrade` is given (opset_upgrade.h), imports.
Result<ir::Model> ImportFile(const std::string& path, const ImportOptions& options,
                             int64_t min_opset, OpsetUpgrade* upgrade) {
  // MappedFile's messages already start with the path.
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  std::shared_ptr<const MappedFile> file = *std::move(mapped);
  return Guarded(path, [&]() -> Result<ir::Model> {
    ::onnx::ModelProto proto;
    QK_RETURN_IF_ERROR(ParseModelProto(file->data(), file->size(), &proto));
    if (upgrade) QK_RETURN_IF_ERROR(internal::UpgradeProtoOpset(&proto, min_opset, upgrade));
    ExternalDataContext ctx;
    ctx.base_dir = options.base_dir.empty() ? DirName(path) : options.base_dir;
    ctx.load = options.load_external_data;
    QK_ASSIGN_OR_RETURN(ir::Model model, ImportParsed(&proto, &ctx, options));
    model.source_path = path;
    return model;
  });
}

}  // namespace

Result<ir::Model> ImportModel(const std::string& path, const ImportOptions& options) {
  return ImportFile(path, options, /*min_opset=*/0, /*upgrade=*/nullptr);
}

Result<ir::Model> ImportModelAtLeastOpset(const std::string& path, int64_t min_opset,
                                          OpsetUpgrade* upgrade, const ImportOptions& options) {
  OpsetUpgrade local;
  return ImportFile(path, options, min_opset, upgrade ? upgrade : &local);
}

Result<ir::Model> ImportModelFromBytes(const void* data, size_t size, const ImportOptions& options,
                                       const std::string& name) {
  return Guarded(name, [&]() -> Result<ir::Model> {
    ::onnx::ModelProto proto;
    QK_RETURN_IF_ERROR(ParseModelProto(static_cast<const uint8_t*>(data), size, &proto));
    ExternalDataContext ctx;
    ctx.base_dir = options.base_dir;
    ctx.load = options.load_external_data;
    return ImportParsed(&proto, &ctx, options);
  });
}

}  // namespace quantkit::onnx_io
