#include "common/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/check.h"

namespace quantkit {

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  QK_RETURN_IF_NOT(in.good(), errno == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                   "{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  QK_RETURN_IF_NOT(!in.bad(), StatusCode::kIoError, "{}: read failed", path);
  return ss.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  QK_RETURN_IF_NOT(fd >= 0, StatusCode::kIoError, "{}: cannot create: {}", tmp,
                   std::strerror(errno));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return MakeStatus(StatusCode::kIoError, "{}: write failed: {}", path, std::strerror(err));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return MakeStatus(StatusCode::kIoError, "{}: flush failed: {}", path, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return MakeStatus(StatusCode::kIoError, "{}: rename failed: {}", path, std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace quantkit
