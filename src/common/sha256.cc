#include "common/sha256.h"

#include <openssl/evp.h>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  QK_CHECK(ctx_->md && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1, "EVP sha256 init");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::Update(const void* data, size_t size) {
  if (size) QK_CHECK(EVP_DigestUpdate(ctx_->md, data, size) == 1, "EVP sha256 update");
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  QK_CHECK(EVP_DigestFinal_ex(ctx_->md, digest, &len) == 1, "EVP sha256 final");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string Sha256Hex(const void* data, size_t size) {
  Sha256 h;
  h.Update(data, size);
  return h.HexDigest();
}

Result<std::string> Sha256OfFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  return Sha256Hex(mapped->data(), mapped->size());
}

}  // namespace quantkit
