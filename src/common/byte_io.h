// Bytes that travel between the ranks of one distributed run (formats/qkstats_wire.h, diagnose's
// per-rank collections): every number is copied as its bytes in the host byte order, so an
// encoding is exact by construction (floats keep their bits, NaN payloads included). Not a file
// format: both ends are the same binary on machines of one byte order (callers check it once).
//
// ByteReader checks every length against the bytes left before it reads or allocates, and its
// errors name `source` and what was being read: a rank that sends something short or garbled is
// an error, never a crash or a huge allocation.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/check.h"

namespace quantkit {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  // u32 length + bytes.
  void PutString(const std::string& s) {
    Put(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  // u32 count + the elements.
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put(static_cast<uint32_t>(v.size()));
    const size_t at = out_.size();
    out_.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out_.data() + at, v.data(), v.size() * sizeof(T));
  }
  void Reserve(size_t more) { out_.reserve(out_.size() + more); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // Both are referenced, not copied: they must outlive the reader.
  ByteReader(const std::string& bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  template <typename T>
  Result<T> Get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    QK_RETURN_IF_NOT(bytes_.size() - at_ >= sizeof(T), StatusCode::kInvalidArgument,
                     "{}: truncated data (reading {} at byte {} of {})", source_, what, at_,
                     bytes_.size());
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  Result<std::string> GetString(const char* what) {
    QK_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>(what));
    QK_RETURN_IF_NOT(bytes_.size() - at_ >= n, StatusCode::kInvalidArgument,
                     "{}: truncated data (reading {} of {} bytes at byte {})", source_, what, n,
                     at_);
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  template <typename T>
  Result<std::vector<T>> GetVector(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    QK_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>(what));
    QK_RETURN_IF_NOT((bytes_.size() - at_) / sizeof(T) >= n, StatusCode::kInvalidArgument,
                     "{}: truncated data (reading {} values of {} at byte {})", source_, n, what,
                     at_);
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  // Fails unless every byte was read.
  Status ExpectEnd() const {
    QK_RETURN_IF_NOT(at_ == bytes_.size(), StatusCode::kInvalidArgument,
                     "{}: {} unexpected bytes at the end", source_, bytes_.size() - at_);
    return Status::Ok();
  }
  bool done() const { return at_ == bytes_.size(); }
  size_t at() const { return at_; }
  const std::string& source() const { return source_; }

 private:
  const std::string& bytes_;
  const std::string& source_;
  size_t at_ = 0;
};

}  // namespace quantkit
