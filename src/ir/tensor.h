// ir::Tensor: a host tensor that owns (or shares) its bytes. No ATen here: the runtime wraps
// these bytes without copying (runtime/aten_bridge), everything else reads them directly.
//
// Storage is a shared, immutable-by-convention Buffer so that weights memory-mapped from an
// external-data file are never copied on import. mutable_data() copies on write when shared.
// String tensors keep their elements in strings() and have no bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace quantkit::ir {

// A contiguous block of bytes; subclasses own heap memory or a mapping of a file.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class HeapBuffer final : public Buffer {
 public:
  explicit HeapBuffer(size_t size) : bytes_(size) {}
  explicit HeapBuffer(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  uint8_t* mutable_data() { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

// Where a tensor's bytes live in the file it was read from (kept so `inspect` can report it and
// export can keep weights external).
enum class TensorLocation { kInline, kExternal };

struct ExternalInfo {
  std::string location;  // path relative to the model directory
  int64_t offset = 0;
  int64_t length = -1;
  std::vector<std::pair<std::string, std::string>> extra;  // other key/value entries, kept verbatim
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given dtype and dims.
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Tensor viewing `size` bytes at `offset` of a shared buffer (no copy).
  Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const Buffer> buffer,
         size_t offset);

  template <typename T>
  static Tensor FromVector(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
    Tensor t(dtype, std::move(dims));
    // memcpy with a null pointer is undefined even for 0 bytes (UBSan): an empty tensor copies
    // nothing.
    const size_t n = std::min(t.nbytes(), values.size() * sizeof(T));
    if (n > 0) std::memcpy(t.mutable_data(), values.data(), n);
    return t;
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  // Product of dims (1 for a scalar).
  int64_t numel() const;
  size_t nbytes() const { return nbytes_; }

  const void* data() const { return buffer_ ? buffer_->data() + offset_ : nullptr; }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  // Copies the bytes into a private heap buffer first if the storage is shared or mapped.
  void* mutable_data();
  template <typename T>
  T* mutable_data_as() {
    return static_cast<T*>(mutable_data());
  }

  std::vector<std::string>& strings() { return strings_; }
  const std::vector<std::string>& strings() const { return strings_; }

  // Bytes equal, dtype and dims equal (strings compared for string tensors).
  bool ContentEquals(const Tensor& other) const;

  // Name and doc string as stored in the file (initializers, attribute tensors).
  std::string name;
  std::string doc_string;
  TensorLocation location = TensorLocation::kInline;
  ExternalInfo external;  // valid when location == kExternal
  std::vector<std::pair<std::string, std::string>> metadata_props;

 private:
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<const Buffer> buffer_;
  size_t offset_ = 0;
  size_t nbytes_ = 0;
  std::vector<std::string> strings_;
};

}  // namespace quantkit::ir
