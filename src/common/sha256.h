// SHA-256 (OpenSSL) for provenance: model and data hashes written into plans and statistics.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "quantkit/status.h"

namespace quantkit {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  // Lowercase hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string Sha256Hex(const void* data, size_t size);
// Streams the file (memory-mapped); errors name the path.
Result<std::string> Sha256OfFile(const std::string& path);

}  // namespace quantkit
