#include "common/atomic_file.h"

#include <unistd.h>

#include <cstdio>

#include "common/check.h"

namespace quantkit {

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  QK_RETURN_IF_NOT(f != nullptr, StatusCode::kIoError, "{}: cannot create {}", path, tmp);
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return MakeStatus(StatusCode::kIoError, "{}: write failed", path);
  }
  return Status::Ok();
}

}  // namespace quantkit
