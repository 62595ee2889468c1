#include "testing/onnx_compare.h"

#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace quantkit::testing {
namespace {

using ::onnx::TensorProto;

template <typename Dst, typename Field>
std::string Pack(const Field& field) {
  std::string out(static_cast<size_t>(field.size()) * sizeof(Dst), '\0');
  for (int i = 0; i < field.size(); ++i) {
    const Dst v = static_cast<Dst>(field.Get(i));
    std::memcpy(&out[static_cast<size_t>(i) * sizeof(Dst)], &v, sizeof(Dst));
  }
  return out;
}

// Bits of storage per element for the int32_data-carried types (0: not carried there).
int Int32DataBits(int dtype) {
  switch (dtype) {
    case TensorProto::INT32:
      return 32;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      return 16;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
    case 17:
    case 18:
    case 19:
    case 20:  // float8 variants
    case 21:
    case 22:
    case 23:  // uint4, int4, float4: one packed byte per entry
      return 8;
    default:
      return 0;
  }
}

std::string NormalizeTensor(TensorProto* t, const std::string& base_dir) {
  if (t->data_location() == TensorProto::EXTERNAL) {
    std::string location;
    long long offset = 0;
    long long length = -1;
    for (const auto& e : t->external_data()) {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = std::stoll(e.value());
      if (e.key() == "length") length = std::stoll(e.value());
    }
    std::ifstream in(base_dir + "/" + location, std::ios::binary);
    if (!in) return "cannot open external data " + location;
    in.seekg(0, std::ios::end);
    const long long size = in.tellg();
    if (length < 0) length = size - offset;
    std::string bytes(static_cast<size_t>(length), '\0');
    in.seekg(offset);
    in.read(&bytes[0], length);
    if (!in) return "short external data " + location;
    t->clear_external_data();
    t->clear_data_location();
    t->set_raw_data(std::move(bytes));
    return "";
  }
  if (t->has_raw_data() || t->data_type() == TensorProto::STRING) return "";
  const int dtype = t->data_type();
  std::string raw;
  if (dtype == TensorProto::FLOAT || dtype == TensorProto::COMPLEX64) {
    raw = Pack<float>(t->float_data());
  } else if (dtype == TensorProto::DOUBLE || dtype == TensorProto::COMPLEX128) {
    raw = Pack<double>(t->double_data());
  } else if (dtype == TensorProto::INT64) {
    raw = Pack<int64_t>(t->int64_data());
  } else if (dtype == TensorProto::UINT64) {
    raw = Pack<uint64_t>(t->uint64_data());
  } else if (dtype == TensorProto::UINT32) {
    raw = Pack<uint32_t>(t->uint64_data());
  } else if (Int32DataBits(dtype) == 32) {
    raw = Pack<int32_t>(t->int32_data());
  } else if (Int32DataBits(dtype) == 16) {
    raw = Pack<uint16_t>(t->int32_data());
  } else if (Int32DataBits(dtype) == 8) {
    raw = Pack<uint8_t>(t->int32_data());
  } else {
    return "unknown dtype " + std::to_string(dtype);
  }
  t->clear_float_data();
  t->clear_double_data();
  t->clear_int32_data();
  t->clear_int64_data();
  t->clear_uint64_data();
  t->set_raw_data(std::move(raw));
  return "";
}

std::string NormalizeGraph(::onnx::GraphProto* g, const std::string& base_dir);

int InferAttributeType(const ::onnx::AttributeProto& a) {
  using A = ::onnx::AttributeProto;
  if (a.has_f()) return A::FLOAT;
  if (a.has_i()) return A::INT;
  if (a.has_s()) return A::STRING;
  if (a.has_t()) return A::TENSOR;
  if (a.has_g()) return A::GRAPH;
  if (a.has_sparse_tensor()) return A::SPARSE_TENSOR;
  if (a.has_tp()) return A::TYPE_PROTO;
  if (a.floats_size()) return A::FLOATS;
  if (a.ints_size()) return A::INTS;
  if (a.strings_size()) return A::STRINGS;
  if (a.tensors_size()) return A::TENSORS;
  if (a.graphs_size()) return A::GRAPHS;
  if (a.sparse_tensors_size()) return A::SPARSE_TENSORS;
  if (a.type_protos_size()) return A::TYPE_PROTOS;
  return A::UNDEFINED;
}

std::string NormalizeNode(::onnx::NodeProto* n, const std::string& base_dir) {
  if (n->domain() == "ai.onnx") n->clear_domain();
  for (auto& a : *n->mutable_attribute()) {
    if (a.type() == 0)
      a.set_type(static_cast<::onnx::AttributeProto::AttributeType>(InferAttributeType(a)));
    std::string err;
    if (a.has_t()) err += NormalizeTensor(a.mutable_t(), base_dir);
    for (auto& t : *a.mutable_tensors()) err += NormalizeTensor(&t, base_dir);
    if (a.has_sparse_tensor()) {
      err += NormalizeTensor(a.mutable_sparse_tensor()->mutable_values(), base_dir);
      err += NormalizeTensor(a.mutable_sparse_tensor()->mutable_indices(), base_dir);
    }
    for (auto& s : *a.mutable_sparse_tensors()) {
      err += NormalizeTensor(s.mutable_values(), base_dir);
      err += NormalizeTensor(s.mutable_indices(), base_dir);
    }
    if (a.has_g()) err += NormalizeGraph(a.mutable_g(), base_dir);
    for (auto& g : *a.mutable_graphs()) err += NormalizeGraph(&g, base_dir);
    if (!err.empty()) return err;
  }
  return "";
}

std::string NormalizeGraph(::onnx::GraphProto* g, const std::string& base_dir) {
  std::string err;
  for (auto& t : *g->mutable_initializer()) err += NormalizeTensor(&t, base_dir);
  for (auto& s : *g->mutable_sparse_initializer()) {
    err += NormalizeTensor(s.mutable_values(), base_dir);
    err += NormalizeTensor(s.mutable_indices(), base_dir);
  }
  for (auto& n : *g->mutable_node()) err += NormalizeNode(&n, base_dir);
  auto* vi = g->mutable_value_info();
  std::stable_sort(vi->begin(), vi->end(),
                   [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return err;
}

}  // namespace

bool LoadModelProto(const std::string& path, ::onnx::ModelProto* proto, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!proto->ParseFromString(buffer.str())) {
    *error = "cannot parse " + path;
    return false;
  }
  return true;
}

std::string NormalizeModel(::onnx::ModelProto* proto, const std::string& base_dir) {
  for (auto& o : *proto->mutable_opset_import()) {
    if (o.domain() == "ai.onnx") o.clear_domain();
  }
  return NormalizeGraph(proto->mutable_graph(), base_dir);
}

std::string FirstDifference(const ::onnx::ModelProto& expected, const ::onnx::ModelProto& actual) {
  google::protobuf::util::MessageDifferencer differencer;
  // Unset equals default: the exporter may omit fields the original set to their defaults.
  differencer.set_message_field_comparison(google::protobuf::util::MessageDifferencer::EQUIVALENT);
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  differencer.set_field_comparator(&comparator);
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (differencer.Compare(expected, actual)) return "";
  const size_t eol = report.find('\n');
  std::string first = report.substr(0, eol);
  if (first.size() > 400) first = first.substr(0, 400) + "...";
  return first.empty() ? "models differ" : first;
}

}  // namespace quantkit::testing
