#include "onnx/export.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <new>

#include "common/check.h"
#include "common/file_util.h"
#include "onnx/proto_io.h"
#include "onnx/tensor_proto.h"

namespace quantkit::onnx_io {
namespace {

using ir::AttrType;

class Exporter {
 public:
  // data_file is null for an all-inline export.
  Exporter(const ExportOptions& options, AtomicFile* data_file)
      : options_(options), data_file_(data_file) {}

  Status ExportModel(const ir::Model& model, ::onnx::ModelProto* proto);

 private:
  Status ExportGraph(const ir::Graph& graph, ::onnx::GraphProto* proto);
  Status ExportNode(const ir::Node& node, ::onnx::NodeProto* proto);
  Status ExportAttribute(const ir::Attribute& attr, ::onnx::AttributeProto* proto);
  Status ExportInitializer(const ir::Value& value, ::onnx::TensorProto* proto);
  Status ExportValueInfo(const ir::Value& value, ::onnx::ValueInfoProto* proto);
  Status ExportType(const ir::TypeInfo& type, ::onnx::TypeProto* proto, const std::string& what);

  const ExportOptions& options_;
  AtomicFile* data_file_;
};

Status Exporter::ExportType(const ir::TypeInfo& type, ::onnx::TypeProto* proto,
                            const std::string& what) {
  if (type.kind == ir::TypeInfo::Kind::kOther) {
    QK_RETURN_IF_NOT(proto->ParseFromString(type.opaque), StatusCode::kInternal,
                     "{}: stored TypeProto does not parse", what);
    return Status::Ok();
  }
  if (!type.denotation.empty()) proto->set_denotation(type.denotation);
  auto fill = [&type](auto* tensor_type) {
    if (type.dtype != ir::DType::kUndefined) {
      tensor_type->set_elem_type(static_cast<int32_t>(type.dtype));
    }
    if (!type.has_shape) return;
    auto* shape = tensor_type->mutable_shape();
    for (const ir::Dim& d : type.dims) {
      auto* dim = shape->add_dim();
      if (d.is_known()) {
        dim->set_dim_value(d.value);
      } else if (!d.param.empty()) {
        dim->set_dim_param(d.param);
      }
      if (!d.denotation.empty()) dim->set_denotation(d.denotation);
    }
  };
  if (type.kind == ir::TypeInfo::Kind::kTensor) fill(proto->mutable_tensor_type());
  if (type.kind == ir::TypeInfo::Kind::kSparseTensor) fill(proto->mutable_sparse_tensor_type());
  return Status::Ok();
}

Status Exporter::ExportValueInfo(const ir::Value& value, ::onnx::ValueInfoProto* proto) {
  proto->set_name(value.name());
  if (value.type.kind != ir::TypeInfo::Kind::kNone) {
    QK_RETURN_IF_ERROR(
        ExportType(value.type, proto->mutable_type(), "value '" + value.name() + "'"));
  }
  if (!value.doc_string.empty()) proto->set_doc_string(value.doc_string);
  WriteUnknownStringPairs(value.metadata_props, kValueInfoMetadataProps,
                          proto->mutable_unknown_fields());
  return Status::Ok();
}

Status Exporter::ExportInitializer(const ir::Value& value, ::onnx::TensorProto* proto) {
  const ir::Tensor& tensor = *value.initializer;
  const bool external = data_file_ != nullptr && tensor.dtype() != ir::DType::kString &&
                        tensor.nbytes() >= options_.size_threshold;
  if (!external) {
    TensorToProto(tensor, proto);
  } else {
    // Bytes are streamed straight from the tensor's storage (often a mapping) to the file.
    const uint64_t pad = (kExternalDataAlignment - data_file_->offset() % kExternalDataAlignment) %
                         kExternalDataAlignment;
    QK_RETURN_IF_ERROR(data_file_->WriteZeros(static_cast<size_t>(pad)));
    const uint64_t offset = data_file_->offset();
    QK_RETURN_IF_ERROR(data_file_->Write(tensor.data(), tensor.nbytes()));
    TensorToExternalProto(tensor, options_.location, offset, proto);
  }
  // The value's name is authoritative (a pass may have renamed it).
  proto->set_name(value.name());
  return Status::Ok();
}

Status Exporter::ExportAttribute(const ir::Attribute& attr, ::onnx::AttributeProto* proto) {
  proto->set_name(attr.name);
  proto->set_type(static_cast<::onnx::AttributeProto::AttributeType>(attr.type));
  if (!attr.doc_string.empty()) proto->set_doc_string(attr.doc_string);
  if (!attr.ref_attr_name.empty()) proto->set_ref_attr_name(attr.ref_attr_name);
  switch (attr.type) {
    case AttrType::kFloat:
      proto->set_f(attr.f);
      break;
    case AttrType::kInt:
      proto->set_i(attr.i);
      break;
    case AttrType::kString:
      proto->set_s(attr.s);
      break;
    case AttrType::kTensor:
      TensorToProto(attr.t, proto->mutable_t());
      break;
    case AttrType::kGraph:
      QK_RETURN_IF_NOT(attr.graph() != nullptr, StatusCode::kInternal,
                       "attribute '{}' of type GRAPH holds no graph", attr.name);
      QK_RETURN_IF_ERROR(ExportGraph(*attr.graph(), proto->mutable_g()));
      break;
    case AttrType::kSparseTensor:
      QK_RETURN_IF_NOT(attr.sparse_tensors.size() == 1, StatusCode::kInternal,
                       "attribute '{}' of type SPARSE_TENSOR holds {} tensors", attr.name,
                       attr.sparse_tensors.size());
      SparseTensorToProto(attr.sparse_tensors.front(), proto->mutable_sparse_tensor());
      break;
    case AttrType::kTypeProto:
      QK_RETURN_IF_NOT(attr.type_protos.size() == 1 &&
                           proto->mutable_tp()->ParseFromString(attr.type_protos.front()),
                       StatusCode::kInternal, "attribute '{}': bad TYPE_PROTO", attr.name);
      break;
    case AttrType::kFloats:
      proto->mutable_floats()->Add(attr.floats.begin(), attr.floats.end());
      break;
    case AttrType::kInts:
      proto->mutable_ints()->Add(attr.ints.begin(), attr.ints.end());
      break;
    case AttrType::kStrings:
      for (const std::string& s : attr.strings) proto->add_strings(s);
      break;
    case AttrType::kTensors:
      for (const ir::Tensor& t : attr.tensors) TensorToProto(t, proto->add_tensors());
      break;
    case AttrType::kGraphs:
      for (const auto& g : attr.graphs) QK_RETURN_IF_ERROR(ExportGraph(*g, proto->add_graphs()));
      break;
    case AttrType::kSparseTensors:
      for (const auto& s : attr.sparse_tensors) SparseTensorToProto(s, proto->add_sparse_tensors());
      break;
    case AttrType::kTypeProtos:
      for (const std::string& tp : attr.type_protos) {
        QK_RETURN_IF_NOT(proto->add_type_protos()->ParseFromString(tp), StatusCode::kInternal,
                         "attribute '{}': bad TYPE_PROTOS entry", attr.name);
      }
      break;
    case AttrType::kUndefined:
      return MakeStatus(StatusCode::kInternal, "attribute '{}' has no type", attr.name);
  }
  return Status::Ok();
}

Status Exporter::ExportNode(const ir::Node& node, ::onnx::NodeProto* proto) {
  for (const ir::Value* in : node.inputs()) proto->add_input(in ? in->name() : std::string());
  for (const ir::Value* out : node.outputs()) proto->add_output(out ? out->name() : std::string());
  if (!node.name.empty()) proto->set_name(node.name);
  proto->set_op_type(node.op_type());
  if (!node.domain().empty()) proto->set_domain(node.domain());
  if (!node.doc_string.empty()) proto->set_doc_string(node.doc_string);
  for (const ir::Attribute& attr : node.attributes()) {
    QK_RETURN_IF_ERROR(ExportAttribute(attr, proto->add_attribute()));
  }
  auto* unknown = proto->mutable_unknown_fields();
  if (!node.overload.empty()) unknown->AddLengthDelimited(kNodeOverload, node.overload);
  WriteUnknownStringPairs(node.metadata_props, kNodeMetadataProps, unknown);
  return Status::Ok();
}

Status Exporter::ExportGraph(const ir::Graph& graph, ::onnx::GraphProto* proto) {
  if (!graph.name.empty()) proto->set_name(graph.name);
  if (!graph.doc_string.empty()) proto->set_doc_string(graph.doc_string);
  for (const ir::Value* v : graph.inputs())
    QK_RETURN_IF_ERROR(ExportValueInfo(*v, proto->add_input()));
  for (const ir::Value* v : graph.initializers()) {
    QK_RETURN_IF_ERROR(ExportInitializer(*v, proto->add_initializer()));
  }
  for (const ir::Value* v : graph.sparse_initializers()) {
    auto* sparse = proto->add_sparse_initializer();
    SparseTensorToProto(*v->sparse_initializer, sparse);
    sparse->mutable_values()->set_name(v->name());
  }
  for (const ir::Node* node : graph.nodes())
    QK_RETURN_IF_ERROR(ExportNode(*node, proto->add_node()));
  for (const ir::Value* v : graph.values()) {
    if (v->has_value_info) QK_RETURN_IF_ERROR(ExportValueInfo(*v, proto->add_value_info()));
  }
  for (const ir::Value* v : graph.outputs()) {
    QK_RETURN_IF_ERROR(ExportValueInfo(*v, proto->add_output()));
  }
  for (const std::string& annotation : graph.quantization_annotations) {
    QK_RETURN_IF_NOT(proto->add_quantization_annotation()->ParseFromString(annotation),
                     StatusCode::kInternal, "graph '{}': bad quantization annotation", graph.name);
  }
  WriteUnknownStringPairs(graph.metadata_props, kGraphMetadataProps,
                          proto->mutable_unknown_fields());
  return Status::Ok();
}

Status Exporter::ExportModel(const ir::Model& model, ::onnx::ModelProto* proto) {
  proto->set_ir_version(model.ir_version);
  for (const ir::OpsetImport& opset : model.opset_imports) {
    auto* o = proto->add_opset_import();
    o->set_domain(opset.domain);
    o->set_version(opset.version);
  }
  if (!model.producer_name.empty()) proto->set_producer_name(model.producer_name);
  if (!model.producer_version.empty()) proto->set_producer_version(model.producer_version);
  if (!model.domain.empty()) proto->set_domain(model.domain);
  if (model.model_version != 0) proto->set_model_version(model.model_version);
  if (!model.doc_string.empty()) proto->set_doc_string(model.doc_string);
  for (const auto& [key, value] : model.metadata_props) {
    auto* p = proto->add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  QK_RETURN_IF_NOT(model.graph != nullptr, StatusCode::kInvalidArgument, "model has no graph");
  // Refuse before copying gigabytes into a protobuf that cannot be serialized anyway.
  uint64_t inline_bytes = 0;
  ir::ForEachGraph(*model.graph, [&](ir::Graph& g) {
    for (const ir::Value* v : g.initializers()) {
      const uint64_t n = v->initializer->nbytes();
      if (data_file_ == nullptr || n < options_.size_threshold) inline_bytes += n;
    }
  });
  QK_RETURN_IF_NOT(inline_bytes <= kMaxProtoBytes, StatusCode::kResourceExhausted,
                   "the model's inline weights are {} bytes, over protobuf's 2 GB limit: export "
                   "with external data (ExportOptions::external_data)",
                   inline_bytes);
  QK_RETURN_IF_ERROR(ExportGraph(*model.graph, proto->mutable_graph()));
  for (const std::string& f : model.functions) {
    QK_RETURN_IF_NOT(proto->add_functions()->ParseFromString(f), StatusCode::kInternal,
                     "stored FunctionProto does not parse");
  }
  for (const std::string& t : model.training_info) {
    QK_RETURN_IF_NOT(proto->add_training_info()->ParseFromString(t), StatusCode::kInternal,
                     "stored TrainingInfoProto does not parse");
  }
  const size_t bytes = proto->ByteSizeLong();
  QK_RETURN_IF_NOT(bytes <= kMaxProtoBytes, StatusCode::kResourceExhausted,
                   "the model protobuf would be {} bytes, over protobuf's 2 GB limit: export "
                   "with external data (ExportOptions::external_data)",
                   bytes);
  return Status::Ok();
}

Status ExportToFile(const ir::Model& model, const std::string& path, const ExportOptions& options) {
  ExportOptions opts = options;
  std::unique_ptr<AtomicFile> data_file;
  if (opts.external_data) {
    if (opts.location.empty()) opts.location = BaseName(path) + ".data";
    QK_RETURN_IF_NOT(IsSafeRelativePath(opts.location), StatusCode::kInvalidArgument,
                     "external data location '{}' must be a relative path without '..'",
                     opts.location);
    QK_ASSIGN_OR_RETURN(data_file, AtomicFile::Create(JoinPath(DirName(path), opts.location)));
  }
  ::onnx::ModelProto proto;
  Exporter exporter(opts, data_file.get());
  QK_RETURN_IF_ERROR(exporter.ExportModel(model, &proto));
  QK_ASSIGN_OR_RETURN(auto model_file, AtomicFile::Create(path));
  {
    // Serialized straight into the file: no second in-memory copy of the model.
    google::protobuf::io::FileOutputStream stream(model_file->fd());
    QK_RETURN_IF_NOT(proto.SerializeToZeroCopyStream(&stream) && stream.Flush(),
                     StatusCode::kIoError, "{}: write failed", path);
  }
  // Data first: a model file never points at a data file that is not in place yet.
  if (data_file) QK_RETURN_IF_ERROR(data_file->Commit());
  return model_file->Commit();
}

}  // namespace

Status ExportModel(const ir::Model& model, const std::string& path, const ExportOptions& options) {
  try {
    return ExportToFile(model, path, options);
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: out of memory while exporting", path);
  } catch (const std::exception& e) {
    return MakeStatus(StatusCode::kInternal, "{}: internal error while exporting: {}", path,
                      e.what());
  }
}

Result<std::string> ExportModelToBytes(const ir::Model& model, const ExportOptions& options) {
  QK_RETURN_IF_NOT(!options.external_data, StatusCode::kInvalidArgument,
                   "ExportModelToBytes writes no external data; export to a file instead");
  try {
    ::onnx::ModelProto proto;
    Exporter exporter(options, nullptr);
    QK_RETURN_IF_ERROR(exporter.ExportModel(model, &proto));
    std::string bytes;
    QK_RETURN_IF_NOT(proto.SerializeToString(&bytes), StatusCode::kInternal,
                     "serializing the model failed");
    return bytes;
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of memory while exporting");
  } catch (const std::exception& e) {
    return MakeStatus(StatusCode::kInternal, "internal error while exporting: {}", e.what());
  }
}

}  // namespace quantkit::onnx_io
