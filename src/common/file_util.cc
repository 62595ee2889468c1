#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/file_checks.h"

namespace quantkit {
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  const StatusCode code =
      (err == ENOENT || err == ENOTDIR) ? StatusCode::kNotFound : StatusCode::kIoError;
  return MakeStatus(code, "{}: {}: {}", path, what, std::strerror(err));
}

// Writes all of [data, data + size), retrying on short writes and EINTR.
Status WriteAll(int fd, const uint8_t* data, size_t size, const std::string& path) {
  // Chunks keep each write() under the 2 GiB Linux per-call limit.
  constexpr size_t kMaxChunk = size_t{1} << 30;
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size < kMaxChunk ? size : kMaxChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write failed", path, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- MappedFile

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::Release(size_t offset, size_t length) const {
  if (!data_ || offset >= size_ || length == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  const size_t end = std::min(size_, offset + length);
  // Pages are file-backed and never written (PROT_READ), so dropping them loses nothing.
  ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

const char* FileTypeName(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

Status CheckRegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot open", path, errno);
  QK_RETURN_IF_NOT(S_ISREG(st.st_mode), StatusCode::kInvalidArgument,
                   "{}: is {}, expected a regular file", path, FileTypeName(st.st_mode));
  return Status::Ok();
}

Status CheckOutputFile(const std::string& path, const std::string& option) {
  struct stat st {};
  if (path.empty() || ::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return Status::Ok();
  return MakeStatus(StatusCode::kInvalidArgument,
                    "{} {}: is {}, not a file quantkit may replace; nothing was written", option,
                    path, S_ISLNK(st.st_mode) ? "a symbolic link" : FileTypeName(st.st_mode));
}

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  // Refuse special files before opening them: open() on a FIFO without a writer blocks forever,
  // and a device can stream without end. O_NONBLOCK closes the race with a path swapped to a FIFO
  // between stat() and open(); fstat() below checks the file actually opened.
  QK_RETURN_IF_ERROR(CheckRegularFile(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeStatus(StatusCode::kInvalidArgument, "{}: is {}, expected a regular file", path,
                      FileTypeName(st.st_mode));
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      file->size_ = 0;
      return ErrnoStatus("cannot mmap", path, err);
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  // The mapping stays valid after the descriptor is closed.
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(file));
}

Result<std::string> ReadFileToString(const std::string& path) {
  QK_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size());
}

// ---------------------------------------------------------------- AtomicFile

AtomicFile::~AtomicFile() { Abandon(); }

Result<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  std::unique_ptr<AtomicFile> file(new AtomicFile());
  file->path_ = path;
  // The temp file lives in the target's directory so that rename() is atomic (same filesystem).
  std::string templ = path + ".tmp.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  const int fd = ::mkstemp(buf.data());
  if (fd < 0) return ErrnoStatus("cannot create temporary file", path, errno);
  // mkstemp creates 0600; outputs are ordinary user files.
  if (::fchmod(fd, 0644) != 0) {
    // Not fatal: the file is still usable by its owner.
  }
  file->fd_ = fd;
  file->temp_path_ = buf.data();
  file->temp_on_signal_ = CleanupOnSignal(file->temp_path_, CleanupKind::kFile);
  return file;
}

Status AtomicFile::Write(const void* data, size_t size) {
  QK_RETURN_IF_NOT(fd_ >= 0, StatusCode::kInternal, "{}: write after commit", path_);
  QK_RETURN_IF_ERROR(WriteAll(fd_, static_cast<const uint8_t*>(data), size, path_));
  offset_ += size;
  return Status::Ok();
}

Status AtomicFile::WriteZeros(size_t count) {
  static const uint8_t kZeros[4096] = {};
  while (count > 0) {
    const size_t n = count < sizeof(kZeros) ? count : sizeof(kZeros);
    QK_RETURN_IF_ERROR(Write(kZeros, n));
    count -= n;
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  QK_RETURN_IF_NOT(fd_ >= 0, StatusCode::kInternal, "{}: commit twice", path_);
  if (::fsync(fd_) != 0) {
    const int err = errno;
    Abandon();
    return ErrnoStatus("fsync failed", path_, err);
  }
  if (::close(fd_) != 0) {
    const int err = errno;
    fd_ = -1;
    Abandon();
    return ErrnoStatus("close failed", path_, err);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    Abandon();
    return ErrnoStatus("cannot rename temporary file into place", path_, err);
  }
  temp_path_.clear();
  temp_on_signal_.Release();
  return Status::Ok();
}

void AtomicFile::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }
  temp_on_signal_.Release();
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  QK_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(path));
  QK_RETURN_IF_ERROR(file->Write(bytes.data(), bytes.size()));
  return file->Commit();
}

// ---------------------------------------------------------------- paths

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string JoinPath(const std::string& dir, const std::string& relative) {
  if (dir.empty() || dir == ".") return relative;
  if (dir.back() == '/') return dir + relative;
  return dir + "/" + relative;
}

bool IsSafeRelativePath(const std::string& relative) {
  if (relative.empty() || relative.front() == '/' || relative.find('\0') != std::string::npos) {
    return false;
  }
  size_t start = 0;
  while (start <= relative.size()) {
    size_t end = relative.find('/', start);
    if (end == std::string::npos) end = relative.size();
    if (relative.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

bool IsInsideDirectory(const std::string& path, const std::string& dir) {
  char resolved_path[PATH_MAX];
  char resolved_dir[PATH_MAX];
  if (::realpath(path.c_str(), resolved_path) == nullptr) return false;
  if (::realpath(dir.c_str(), resolved_dir) == nullptr) return false;
  const std::string p(resolved_path);
  std::string d(resolved_dir);
  if (d.back() != '/') d += '/';
  return p.compare(0, d.size(), d) == 0;
}

}  // namespace quantkit
