#include "onnx/tensor_proto.h"

#include <cstring>
#include <limits>
#include <utility>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit::onnx_io {
namespace {

using google::protobuf::RepeatedField;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using ir::DType;

// Takes ownership of a raw_data string released from a TensorProto: no copy of the weights.
class StringBuffer final : public ir::Buffer {
 public:
  explicit StringBuffer(std::string* bytes) : bytes_(bytes) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(bytes_->data()); }
  size_t size() const override { return bytes_->size(); }

 private:
  std::unique_ptr<std::string> bytes_;
};

// Keeps an external-data file mapped for as long as any tensor views it.
class MappedBuffer final : public ir::Buffer {
 public:
  explicit MappedBuffer(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}
  const uint8_t* data() const override { return file_->data(); }
  size_t size() const override { return file_->size(); }

 private:
  std::shared_ptr<const MappedFile> file_;
};

// Element count of `dims`, rejecting negative dims and counts whose byte size would overflow.
Result<int64_t> CheckedNumel(const RepeatedField<int64_t>& dims, const std::string& what) {
  // 2^60 elements of 16 bytes still fit in int64 bytes: the bound keeps every later size product
  // free of overflow.
  constexpr int64_t kMaxElements = int64_t{1} << 60;
  int64_t n = 1;
  for (int64_t d : dims) {
    QK_RETURN_IF_NOT(d >= 0, StatusCode::kInvalidModel, "{}: negative dimension {}", what, d);
    if (d == 0) return int64_t{0};
    QK_RETURN_IF_NOT(n <= kMaxElements / d, StatusCode::kInvalidModel,
                     "{}: element count overflows (dims too large)", what);
    n *= d;
  }
  return n;
}

// Copies typed values into `dst`, narrowing each to Dst (the ONNX rule for int32_data and
// uint64_data holding smaller types: the value's low bits are the element).
template <typename Dst, typename Src>
void Narrow(const RepeatedField<Src>& src, uint8_t* dst) {
  for (int i = 0; i < src.size(); ++i) {
    const Dst v = static_cast<Dst>(src.Get(i));
    std::memcpy(dst + static_cast<size_t>(i) * sizeof(Dst), &v, sizeof(Dst));
  }
}

Result<int64_t> ParseNonNegative(const std::string& text, const std::string& what) {
  QK_RETURN_IF_NOT(!text.empty() && text.size() <= 18 &&
                       text.find_first_not_of("0123456789") == std::string::npos,
                   StatusCode::kInvalidModel, "{}: '{}' is not a valid non-negative integer", what,
                   text);
  return static_cast<int64_t>(std::stoll(text));
}

Result<ir::Tensor> ExternalTensor(const ::onnx::TensorProto& proto, DType dtype,
                                  std::vector<int64_t> dims, size_t nbytes,
                                  ExternalDataContext* ctx, const std::string& what) {
  QK_RETURN_IF_NOT(dtype != DType::kString, StatusCode::kInvalidModel,
                   "{}: string tensors cannot use external data", what);
  ir::ExternalInfo info;
  bool has_location = false;
  bool has_length = false;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      info.location = entry.value();
      has_location = true;
    } else if (entry.key() == "offset") {
      QK_ASSIGN_OR_RETURN(info.offset, ParseNonNegative(entry.value(), what + ": external offset"));
    } else if (entry.key() == "length") {
      QK_ASSIGN_OR_RETURN(info.length, ParseNonNegative(entry.value(), what + ": external length"));
      has_length = true;
    } else {
      info.extra.emplace_back(entry.key(), entry.value());
    }
  }
  QK_RETURN_IF_NOT(has_location, StatusCode::kInvalidModel,
                   "{}: external data without a 'location' entry", what);
  QK_RETURN_IF_NOT(IsSafeRelativePath(info.location), StatusCode::kInvalidModel,
                   "{}: external data location '{}' must be a relative path inside the model "
                   "directory (no '..', not absolute)",
                   what, info.location);
  QK_RETURN_IF_NOT(ctx != nullptr && ctx->load, StatusCode::kUnsupported,
                   "{}: external data is not loaded in this mode", what);
  QK_RETURN_IF_NOT(!ctx->base_dir.empty(), StatusCode::kInvalidArgument,
                   "{}: external data '{}' needs the model's directory (load from a path or set "
                   "ImportOptions::base_dir)",
                   what, info.location);
  if (has_length) {
    QK_RETURN_IF_NOT(static_cast<uint64_t>(info.length) == nbytes, StatusCode::kInvalidModel,
                     "{}: external data length {} does not match the {} bytes its dims and dtype "
                     "need",
                     what, info.length, nbytes);
  }
  auto it = ctx->files.find(info.location);
  if (it == ctx->files.end()) {
    const std::string path = JoinPath(ctx->base_dir, info.location);
    auto mapped = MappedFile::Open(path);
    if (!mapped.ok()) {
      return Status(mapped.status().code() == StatusCode::kNotFound ? StatusCode::kNotFound
                                                                    : mapped.status().code(),
                    fmt::format("{}: external data file '{}' cannot be read: {}", what,
                                info.location, mapped.status().message()));
    }
    // Lexical checks passed; this catches symlinks that point out of the model directory.
    QK_RETURN_IF_NOT(IsInsideDirectory(path, ctx->base_dir), StatusCode::kInvalidModel,
                     "{}: external data file '{}' resolves outside the model directory", what,
                     info.location);
    it =
        ctx->files.emplace(info.location, std::make_shared<MappedBuffer>(*std::move(mapped))).first;
  }
  const std::shared_ptr<const ir::Buffer>& file = it->second;
  // Bounds are checked before the tensor ever points into the mapping.
  QK_RETURN_IF_NOT(
      static_cast<uint64_t>(info.offset) <= file->size() &&
          nbytes <= file->size() - static_cast<uint64_t>(info.offset),
      StatusCode::kInvalidModel, "{}: external data [{}, {}) lies outside file '{}' of {} bytes",
      what, info.offset, static_cast<uint64_t>(info.offset) + nbytes, info.location, file->size());
  ir::Tensor tensor(dtype, std::move(dims), file, static_cast<size_t>(info.offset));
  tensor.location = ir::TensorLocation::kExternal;
  tensor.external = std::move(info);
  return tensor;
}

// Checks the typed repeated field that ONNX prescribes for `dtype` holds exactly the declared
// element count, BEFORE the tensor is allocated: a 130-byte model declaring a [30000, 30000]
// initializer with no data must fail here, not after allocating 3.6 GB.
Status CheckTypedCount(const ::onnx::TensorProto& proto, DType dtype, int64_t numel,
                       const std::string& what) {
  const auto n = static_cast<uint64_t>(numel);
  const char* field = "int32_data";
  uint64_t have = static_cast<uint64_t>(proto.int32_data_size());
  uint64_t want = n;
  switch (dtype) {
    case DType::kString:
      field = "string_data";
      have = static_cast<uint64_t>(proto.string_data_size());
      break;
    case DType::kFloat:
      field = "float_data";
      have = static_cast<uint64_t>(proto.float_data_size());
      break;
    case DType::kComplex64:
      field = "float_data";
      have = static_cast<uint64_t>(proto.float_data_size());
      want = 2 * n;
      break;
    case DType::kDouble:
      field = "double_data";
      have = static_cast<uint64_t>(proto.double_data_size());
      break;
    case DType::kComplex128:
      field = "double_data";
      have = static_cast<uint64_t>(proto.double_data_size());
      want = 2 * n;
      break;
    case DType::kInt64:
      field = "int64_data";
      have = static_cast<uint64_t>(proto.int64_data_size());
      break;
    case DType::kUint64:
    case DType::kUint32:
      field = "uint64_data";
      have = static_cast<uint64_t>(proto.uint64_data_size());
      break;
    case DType::kInt4:
    case DType::kUint4:
    case DType::kFloat4E2M1:
      want = (n + 1) / 2;
      break;
    default:
      break;  // the remaining dtypes travel in int32_data, one element per entry
  }
  QK_RETURN_IF_NOT(
      have == want, StatusCode::kInvalidModel,
      "{}: declares {} elements of {} but {} holds {} values (expected {}); no data to allocate",
      what, numel, ir::DTypeName(dtype), field, have, want);
  return Status::Ok();
}

// Converts the typed repeated field that ONNX prescribes for `dtype` into raw bytes.
Status TypedToRaw(const ::onnx::TensorProto& proto, DType dtype, int64_t numel, ir::Tensor* out,
                  const std::string& what) {
  const auto n = static_cast<size_t>(numel);
  auto expect = [&](const char* field, int have, size_t want) -> Status {
    QK_RETURN_IF_NOT(static_cast<size_t>(have) == want, StatusCode::kInvalidModel,
                     "{}: {} has {} values, expected {} for dtype {} and {} elements", what, field,
                     have, want, ir::DTypeName(dtype), numel);
    return Status::Ok();
  };
  if (dtype == DType::kString) {
    QK_RETURN_IF_ERROR(expect("string_data", proto.string_data_size(), n));
    out->strings().assign(proto.string_data().begin(), proto.string_data().end());
    return Status::Ok();
  }
  uint8_t* dst = static_cast<uint8_t*>(out->mutable_data());
  switch (dtype) {
    case DType::kFloat:
    case DType::kComplex64: {
      const size_t want = dtype == DType::kFloat ? n : 2 * n;
      QK_RETURN_IF_ERROR(expect("float_data", proto.float_data_size(), want));
      if (want) std::memcpy(dst, proto.float_data().data(), want * sizeof(float));
      return Status::Ok();
    }
    case DType::kDouble:
    case DType::kComplex128: {
      const size_t want = dtype == DType::kDouble ? n : 2 * n;
      QK_RETURN_IF_ERROR(expect("double_data", proto.double_data_size(), want));
      if (want) std::memcpy(dst, proto.double_data().data(), want * sizeof(double));
      return Status::Ok();
    }
    case DType::kInt64:
      QK_RETURN_IF_ERROR(expect("int64_data", proto.int64_data_size(), n));
      if (n) std::memcpy(dst, proto.int64_data().data(), n * sizeof(int64_t));
      return Status::Ok();
    case DType::kUint64:
      QK_RETURN_IF_ERROR(expect("uint64_data", proto.uint64_data_size(), n));
      if (n) std::memcpy(dst, proto.uint64_data().data(), n * sizeof(uint64_t));
      return Status::Ok();
    case DType::kUint32:
      QK_RETURN_IF_ERROR(expect("uint64_data", proto.uint64_data_size(), n));
      Narrow<uint32_t>(proto.uint64_data(), dst);
      return Status::Ok();
    case DType::kInt32:
      QK_RETURN_IF_ERROR(expect("int32_data", proto.int32_data_size(), n));
      if (n) std::memcpy(dst, proto.int32_data().data(), n * sizeof(int32_t));
      return Status::Ok();
    case DType::kInt16:
    case DType::kUint16:
    case DType::kFloat16:
    case DType::kBFloat16:
      QK_RETURN_IF_ERROR(expect("int32_data", proto.int32_data_size(), n));
      Narrow<uint16_t>(proto.int32_data(), dst);
      return Status::Ok();
    case DType::kInt8:
    case DType::kUint8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      QK_RETURN_IF_ERROR(expect("int32_data", proto.int32_data_size(), n));
      Narrow<uint8_t>(proto.int32_data(), dst);
      return Status::Ok();
    case DType::kInt4:
    case DType::kUint4:
    case DType::kFloat4E2M1:
      // Each int32_data entry holds one byte: two 4-bit elements, the first in the low nibble.
      QK_RETURN_IF_ERROR(expect("int32_data", proto.int32_data_size(), (n + 1) / 2));
      Narrow<uint8_t>(proto.int32_data(), dst);
      return Status::Ok();
    case DType::kString:
    case DType::kUndefined:
      break;
  }
  return MakeStatus(StatusCode::kInvalidModel, "{}: unsupported dtype {}", what,
                    static_cast<int>(dtype));
}

}  // namespace

Result<ir::Tensor> TensorFromProto(::onnx::TensorProto* proto, ExternalDataContext* ctx,
                                   const std::string& what) {
  QK_RETURN_IF_NOT(ir::IsKnownDType(proto->data_type()), StatusCode::kInvalidModel,
                   "{}: unknown data_type {}", what, proto->data_type());
  QK_RETURN_IF_NOT(!proto->has_segment(), StatusCode::kUnsupported,
                   "{}: segmented tensors are not supported", what);
  const auto dtype = static_cast<DType>(proto->data_type());
  QK_ASSIGN_OR_RETURN(const int64_t numel, CheckedNumel(proto->dims(), what));
  std::vector<int64_t> dims(proto->dims().begin(), proto->dims().end());
  const size_t nbytes = ir::StorageBytes(dtype, numel);

  ir::Tensor tensor;
  if (proto->data_location() == ::onnx::TensorProto::EXTERNAL) {
    QK_ASSIGN_OR_RETURN(tensor, ExternalTensor(*proto, dtype, dims, nbytes, ctx, what));
  } else if (proto->has_raw_data() && dtype != DType::kString) {
    QK_RETURN_IF_NOT(proto->raw_data().size() == nbytes, StatusCode::kInvalidModel,
                     "{}: raw_data has {} bytes, expected {} for dtype {} and {} elements", what,
                     proto->raw_data().size(), nbytes, ir::DTypeName(dtype), numel);
    auto buffer = std::make_shared<StringBuffer>(proto->release_raw_data());
    tensor = ir::Tensor(dtype, std::move(dims), std::move(buffer), 0);
  } else {
    QK_RETURN_IF_ERROR(CheckTypedCount(*proto, dtype, numel, what));
    tensor = ir::Tensor(dtype, std::move(dims));
    QK_RETURN_IF_ERROR(TypedToRaw(*proto, dtype, numel, &tensor, what));
  }
  tensor.name = proto->name();
  tensor.doc_string = proto->doc_string();
  tensor.metadata_props = ReadUnknownStringPairs(proto->unknown_fields(), kTensorMetadataProps);
  return tensor;
}

Result<ir::SparseTensor> SparseTensorFromProto(::onnx::SparseTensorProto* proto,
                                               ExternalDataContext* ctx, const std::string& what) {
  ir::SparseTensor sparse;
  QK_ASSIGN_OR_RETURN(sparse.values,
                      TensorFromProto(proto->mutable_values(), ctx, what + " (values)"));
  QK_ASSIGN_OR_RETURN(sparse.indices,
                      TensorFromProto(proto->mutable_indices(), ctx, what + " (indices)"));
  sparse.dims.assign(proto->dims().begin(), proto->dims().end());
  QK_ASSIGN_OR_RETURN(const int64_t dense_numel, CheckedNumel(proto->dims(), what));
  // Structure rules of SparseTensorProto; index values are range-checked so that a consumer that
  // densifies the tensor cannot write out of bounds.
  QK_RETURN_IF_NOT(sparse.values.rank() == 1, StatusCode::kInvalidModel,
                   "{}: sparse values must be 1-D, got rank {}", what, sparse.values.rank());
  const int64_t nnz = sparse.values.dims()[0];
  const ir::Tensor& idx = sparse.indices;
  QK_RETURN_IF_NOT(idx.dtype() == DType::kInt64, StatusCode::kInvalidModel,
                   "{}: sparse indices must be int64", what);
  const bool linear = idx.rank() == 1;
  QK_RETURN_IF_NOT((linear && idx.dims()[0] == nnz) ||
                       (idx.rank() == 2 && idx.dims()[0] == nnz &&
                        idx.dims()[1] == static_cast<int64_t>(sparse.dims.size())),
                   StatusCode::kInvalidModel,
                   "{}: sparse indices must have shape [NNZ] or [NNZ, rank] with NNZ = {}", what,
                   nnz);
  const auto* index = static_cast<const uint8_t*>(idx.data());
  for (int64_t k = 0; k < idx.numel(); ++k) {
    int64_t v = 0;
    // Byte-wise copy: external data may be unaligned.
    std::memcpy(&v, index + static_cast<size_t>(k) * sizeof(v), sizeof(v));
    const int64_t bound =
        linear ? dense_numel : sparse.dims[static_cast<size_t>(k % idx.dims()[1])];
    QK_RETURN_IF_NOT(v >= 0 && v < bound, StatusCode::kInvalidModel,
                     "{}: sparse index {} out of range [0, {})", what, v, bound);
  }
  return sparse;
}

namespace {
// Everything but the data: dims, dtype, name, doc string and IR-10 metadata.
void TensorHeaderToProto(const ir::Tensor& tensor, ::onnx::TensorProto* proto) {
  for (int64_t d : tensor.dims()) proto->add_dims(d);
  proto->set_data_type(static_cast<int32_t>(tensor.dtype()));
  if (!tensor.name.empty()) proto->set_name(tensor.name);
  if (!tensor.doc_string.empty()) proto->set_doc_string(tensor.doc_string);
  WriteUnknownStringPairs(tensor.metadata_props, kTensorMetadataProps,
                          proto->mutable_unknown_fields());
}
}  // namespace

void TensorToProto(const ir::Tensor& tensor, ::onnx::TensorProto* proto) {
  TensorHeaderToProto(tensor, proto);
  if (tensor.dtype() == DType::kString) {
    for (const std::string& s : tensor.strings()) proto->add_string_data(s);
  } else {
    // (An empty tensor may have no buffer at all: never hand a null pointer to the string.)
    proto->set_raw_data(tensor.nbytes() ? static_cast<const char*>(tensor.data()) : "",
                        tensor.nbytes());
  }
}

void TensorToExternalProto(const ir::Tensor& tensor, const std::string& location, uint64_t offset,
                           ::onnx::TensorProto* proto) {
  TensorHeaderToProto(tensor, proto);
  proto->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto add = [proto](const std::string& key, const std::string& value) {
    auto* entry = proto->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(tensor.nbytes()));
}

void SparseTensorToProto(const ir::SparseTensor& tensor, ::onnx::SparseTensorProto* proto) {
  TensorToProto(tensor.values, proto->mutable_values());
  TensorToProto(tensor.indices, proto->mutable_indices());
  for (int64_t d : tensor.dims) proto->add_dims(d);
}

// ---------------------------------------------------------------- unknown fields

ir::StringPairs ReadUnknownStringPairs(const UnknownFieldSet& fields, int number) {
  ir::StringPairs out;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() != number || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    ::onnx::StringStringEntryProto entry;
    // An unparsable entry is skipped rather than failing the model: the field is optional
    // metadata this libonnx version does not know.
    if (entry.ParseFromString(f.length_delimited())) out.emplace_back(entry.key(), entry.value());
  }
  return out;
}

std::string ReadUnknownString(const UnknownFieldSet& fields, int number) {
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
      return f.length_delimited();
    }
  }
  return {};
}

void WriteUnknownStringPairs(const ir::StringPairs& pairs, int number, UnknownFieldSet* fields) {
  for (const auto& [key, value] : pairs) {
    ::onnx::StringStringEntryProto entry;
    entry.set_key(key);
    entry.set_value(value);
    fields->AddLengthDelimited(number, entry.SerializeAsString());
  }
}

}  // namespace quantkit::onnx_io
