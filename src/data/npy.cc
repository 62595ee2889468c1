#include "data/npy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "common/check.h"
#include "common/file_util.h"
#include "data/source_internal.h"

namespace quantkit::data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;  // numpy pads the header so data starts 64-byte aligned

struct Descr {
  ir::DType dtype = ir::DType::kUndefined;
  size_t item_size = 0;
  bool big_endian = false;
};

// '<f4', '>i8', '|u1', '=f2', '|b1' ...
bool ParseDescr(const std::string& s, Descr* d) {
  if (s.size() < 3) return false;
  const char order = s[0], kind = s[1];
  if (order != '<' && order != '>' && order != '|' && order != '=') return false;
  const std::string size_text = s.substr(2);
  if (size_text.empty() || size_text.size() > 1 ||
      !std::isdigit(static_cast<unsigned char>(size_text[0])))
    return false;
  const int size = size_text[0] - '0';
  d->item_size = static_cast<size_t>(size);
  d->big_endian = order == '>';
  using ir::DType;
  if (kind == 'f') {
    d->dtype = size == 2   ? DType::kFloat16
               : size == 4 ? DType::kFloat
               : size == 8 ? DType::kDouble
                           : DType::kUndefined;
  } else if (kind == 'i') {
    d->dtype = size == 1   ? DType::kInt8
               : size == 2 ? DType::kInt16
               : size == 4 ? DType::kInt32
               : size == 8 ? DType::kInt64
                           : DType::kUndefined;
  } else if (kind == 'u') {
    d->dtype = size == 1   ? DType::kUint8
               : size == 2 ? DType::kUint16
               : size == 4 ? DType::kUint32
               : size == 8 ? DType::kUint64
                           : DType::kUndefined;
  } else if (kind == 'b') {
    d->dtype = size == 1 ? DType::kBool : DType::kUndefined;
  }
  return d->dtype != DType::kUndefined;
}

// A tiny parser for the header's Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  bool Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape, std::string* error) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    if (!Eat('{')) return Fail(error, "header does not start with '{'");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      if (!String(&key)) return Fail(error, "expected a quoted key");
      if (!Eat(':')) return Fail(error, "expected ':' after '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (!String(descr))
          return Fail(error, "descr is not a string (structured dtypes are not supported)");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True"))
          *fortran = true;
        else if (Word("False"))
          *fortran = false;
        else
          return Fail(error, "fortran_order is not True or False");
        have_fortran = true;
      } else if (key == "shape") {
        if (!Tuple(shape)) return Fail(error, "shape is not a tuple of non-negative integers");
        have_shape = true;
      } else {
        return Fail(error, "unknown header key '" + key + "'");
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Fail(error, "expected ',' or '}' in header");
    }
    if (!have_descr || !have_fortran || !have_shape) {
      return Fail(error, "header lacks descr, fortran_order or shape");
    }
    SkipSpace();  // numpy pads with spaces and ends with '\n'
    if (pos_ != s_.size()) return Fail(error, "unexpected text after the header dict");
    return true;
  }

 private:
  static bool Fail(std::string* error, const std::string& what) {
    *error = what;
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) return false;
    *out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool Tuple(std::vector<int64_t>* out) {
    if (!Eat('(')) return false;
    out->clear();
    while (true) {
      SkipSpace();
      if (Eat(')')) return true;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return false;
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 longs
      out->push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat(')')) return true;
      return false;
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

uint32_t ReadLe(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    f = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -f : f;
}

}  // namespace

namespace {

struct NpyLayout {
  Descr descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
  uint64_t numel = 0;
};

// Checks the preamble and header against the file size; nothing is allocated from file values
// before they are bounded by it.
Status ParseNpyLayout(const uint8_t* bytes, size_t size, const std::string& source, NpyLayout* out,
                      size_t readable = SIZE_MAX) {
  auto fail = [&](const std::string& what) {
    return Status(StatusCode::kInvalidModel, source + ": " + what);
  };
  // Only the first `readable` bytes are present (a streamed archive member); `size` is the
  // declared total the data size is checked against.
  readable = std::min(readable, size);
  if (readable < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return fail("not a .npy file (bad magic)");
  }
  const int major = bytes[6];
  if (major < 1 || major > 3)
    return fail("unsupported .npy format version " + std::to_string(major));
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = kMagicSize + 2 + len_bytes;
  if (readable < preamble) return fail("truncated header");
  const uint32_t header_len = ReadLe(bytes + kMagicSize + 2, static_cast<int>(len_bytes));
  if (header_len > kMaxNpyHeaderBytes)
    return fail("header length " + std::to_string(header_len) + " is too large");
  if (preamble + header_len > size) {
    return fail("header length " + std::to_string(header_len) + " exceeds the file size " +
                std::to_string(size));
  }
  if (preamble + header_len > readable) return fail("truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes + preamble), header_len);
  std::string descr_text, error;
  if (!HeaderParser(header).Parse(&descr_text, &out->fortran, &out->shape, &error))
    return fail("bad header: " + error);
  if (!ParseDescr(descr_text, &out->descr)) return fail("unsupported dtype '" + descr_text + "'");
  // Element count without overflow, bounded by what the file can hold.
  out->data_offset = preamble + header_len;
  const size_t available = size - out->data_offset;
  uint64_t numel = 1;
  for (int64_t d : out->shape) {
    if (d != 0 && numel > available / static_cast<uint64_t>(d)) {
      return fail("shape is larger than the file (" + std::to_string(available) + " data bytes)");
    }
    numel *= static_cast<uint64_t>(d);
  }
  const uint64_t need = numel * out->descr.item_size;
  if (need != available) {
    return fail("shape needs " + std::to_string(need) + " data bytes but the file has " +
                std::to_string(available));
  }
  out->numel = numel;
  return Status();
}

}  // namespace

Result<internal::NpyHeader> internal::ParseNpyHeader(const uint8_t* bytes, size_t available,
                                                     uint64_t total_size,
                                                     const std::string& source) {
  static_assert(sizeof(size_t) >= sizeof(uint64_t), "64-bit sizes");
  NpyLayout layout;
  QK_RETURN_IF_ERROR(
      ParseNpyLayout(bytes, static_cast<size_t>(total_size), source, &layout, available));
  NpyHeader h;
  h.dtype = layout.descr.dtype;
  h.item_size = layout.descr.item_size;
  h.big_endian = layout.descr.big_endian;
  h.fortran = layout.fortran;
  h.shape = layout.shape;
  h.data_offset = layout.data_offset;
  return h;
}

namespace {

// Views the mapping without copying; keeps the file mapped while any tensor uses it.
class MappedNpyBuffer final : public ir::Buffer {
 public:
  explicit MappedNpyBuffer(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}
  const uint8_t* data() const override { return file_->data(); }
  size_t size() const override { return file_->size(); }

 private:
  std::shared_ptr<const MappedFile> file_;
};

}  // namespace

Result<ir::Tensor> ParseNpy(const uint8_t* bytes, size_t size, const std::string& source) {
  auto fail = [&](const std::string& what) {
    return Status(StatusCode::kInvalidModel, source + ": " + what);
  };
  NpyLayout layout;
  QK_RETURN_IF_ERROR(ParseNpyLayout(bytes, size, source, &layout));
  const Descr& descr = layout.descr;
  const bool fortran = layout.fortran;
  const std::vector<int64_t>& shape = layout.shape;
  const size_t data_offset = layout.data_offset;
  const uint64_t numel = layout.numel;
  const uint64_t need = numel * descr.item_size;
  ir::Tensor t(descr.dtype, shape);
  uint8_t* out = static_cast<uint8_t*>(t.mutable_data());
  const uint8_t* in = bytes + data_offset;
  const size_t item = descr.item_size;
  if (!fortran || shape.size() < 2) {
    if (need) std::memcpy(out, in, need);
  } else {
    // Fortran (column-major) source: walk the row-major destination with an odometer.
    const size_t rank = shape.size();
    std::vector<uint64_t> fstride(rank, 1);
    for (size_t k = 1; k < rank; ++k)
      fstride[k] = fstride[k - 1] * static_cast<uint64_t>(shape[k - 1]);
    std::vector<int64_t> idx(rank, 0);
    uint64_t src = 0;
    for (uint64_t i = 0; i < numel; ++i) {
      std::memcpy(out + i * item, in + src * item, item);
      for (size_t k = rank; k-- > 0;) {
        if (++idx[k] < shape[k]) {
          src += fstride[k];
          break;
        }
        src -= fstride[k] * static_cast<uint64_t>(idx[k] - 1);
        idx[k] = 0;
      }
    }
  }
  if (descr.big_endian && item > 1) {
    for (uint64_t i = 0; i < numel; ++i) std::reverse(out + i * item, out + (i + 1) * item);
  }
  if (descr.dtype == ir::DType::kBool) {
    for (uint64_t i = 0; i < numel; ++i) {
      if (out[i] > 1) return fail("bool element " + std::to_string(i) + " is not 0 or 1");
    }
  }
  return t;
}

Result<ir::Tensor> ReadNpy(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  return ParseNpy(file->data(), file->size(), path);
}

Result<ir::Tensor> MapNpy(const std::string& path, std::shared_ptr<const MappedFile>* mapping) {
  if (mapping) mapping->reset();
  QK_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  NpyLayout layout;
  QK_RETURN_IF_ERROR(ParseNpyLayout(file->data(), file->size(), path, &layout));
  // Only what numpy writes by default can be viewed as is: little-endian (or 1-byte) C order.
  // Anything else (and bool, whose bytes need checking) goes through the copying parser.
  const bool viewable = (!layout.fortran || layout.shape.size() < 2) &&
                        (!layout.descr.big_endian || layout.descr.item_size == 1) &&
                        layout.descr.dtype != ir::DType::kBool && layout.numel > 0;
  if (!viewable) return ParseNpy(file->data(), file->size(), path);
  if (mapping) *mapping = file;
  return ir::Tensor(layout.descr.dtype, layout.shape, std::make_shared<MappedNpyBuffer>(file),
                    layout.data_offset);
}

Result<std::string> EncodeNpy(const ir::Tensor& t, const std::string& path) {
  const char* descr = nullptr;
  switch (t.dtype()) {
    case ir::DType::kFloat16:
      descr = "<f2";
      break;
    case ir::DType::kFloat:
      descr = "<f4";
      break;
    case ir::DType::kDouble:
      descr = "<f8";
      break;
    case ir::DType::kInt8:
      descr = "|i1";
      break;
    case ir::DType::kInt16:
      descr = "<i2";
      break;
    case ir::DType::kInt32:
      descr = "<i4";
      break;
    case ir::DType::kInt64:
      descr = "<i8";
      break;
    case ir::DType::kUint8:
      descr = "|u1";
      break;
    case ir::DType::kUint16:
      descr = "<u2";
      break;
    case ir::DType::kUint32:
      descr = "<u4";
      break;
    case ir::DType::kUint64:
      descr = "<u8";
      break;
    case ir::DType::kBool:
      descr = "|b1";
      break;
    default:
      return MakeStatus(StatusCode::kUnsupported, "{}: cannot write dtype {} to .npy", path,
                        ir::DTypeName(t.dtype()));
  }
  std::string shape = "(";
  for (size_t k = 0; k < t.dims().size(); ++k) {
    shape += std::to_string(t.dims()[k]) + (t.dims().size() == 1      ? ","
                                            : k + 1 < t.dims().size() ? ", "
                                                                      : "");
  }
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t preamble = kMagicSize + 2 + 2;
  const size_t total = ((preamble + header.size() + 1 + kAlignment - 1) / kAlignment) * kAlignment;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';
  QK_RETURN_IF_NOT(header.size() <= 0xffff, StatusCode::kUnsupported, "{}: header too long", path);
  std::string bytes(kMagic, kMagicSize);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  if (t.nbytes() > 0) bytes.append(static_cast<const char*>(t.data()), t.nbytes());
  return bytes;
}

Status WriteNpy(const std::string& path, const ir::Tensor& t) {
  QK_ASSIGN_OR_RETURN(std::string bytes, EncodeNpy(t, path));
  return WriteFileAtomic(path, bytes);
}

Result<std::vector<float>> ToFloat32(const ir::Tensor& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_as<T>();
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(p[i]);
  };
  switch (t.dtype()) {
    case ir::DType::kFloat:
      convert(float{});
      break;
    case ir::DType::kDouble:
      convert(double{});
      break;
    case ir::DType::kInt8:
      convert(int8_t{});
      break;
    case ir::DType::kInt16:
      convert(int16_t{});
      break;
    case ir::DType::kInt32:
      convert(int32_t{});
      break;
    case ir::DType::kInt64:
      convert(int64_t{});
      break;
    case ir::DType::kUint8:
      convert(uint8_t{});
      break;
    case ir::DType::kUint16:
      convert(uint16_t{});
      break;
    case ir::DType::kUint32:
      convert(uint32_t{});
      break;
    case ir::DType::kUint64:
      convert(uint64_t{});
      break;
    case ir::DType::kBool:
      convert(uint8_t{});
      break;
    case ir::DType::kFloat16: {
      const uint16_t* p = t.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = HalfToFloat(p[i]);
      break;
    }
    default:
      return MakeStatus(StatusCode::kUnsupported, "cannot convert a {} tensor to float32",
                        ir::DTypeName(t.dtype()));
  }
  return out;
}

}  // namespace quantkit::data
