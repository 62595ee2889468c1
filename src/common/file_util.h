// File helpers shared by every reader and writer: read-only memory maps, whole-file reads and
// atomic writes (temp file in the same directory, fsync, rename), plus path checks for paths
// that come from untrusted files.
//
// Contract: no function here aborts or throws on bad input; errors come back as Status with the
// file name in the message. An AtomicFile that is not committed leaves nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/signal_cleanup.h"
#include "quantkit/status.h"

namespace quantkit {

// A read-only mapping of a whole file. Empty files map to data() == nullptr, size() == 0.
class MappedFile {
 public:
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only (MAP_PRIVATE): later writers that replace the file by rename do not
  // affect the mapping. kNotFound when missing, kIoError for other failures; a special file
  // (FIFO, directory, device) is refused before it is opened (common/file_checks.h).
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Gives back the resident pages of [offset, offset + length) (madvise MADV_DONTNEED): the
  // mapping stays valid and re-reads the file on the next access. Readers that stream through a
  // large file call this on what they consumed, so their RSS does not grow with the file.
  void Release(size_t offset, size_t length) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole file into memory.
Result<std::string> ReadFileToString(const std::string& path);

// Writes a file atomically: bytes go to a temp file next to `path`; Commit() flushes, fsyncs and
// renames it over `path`. Destroying an uncommitted AtomicFile removes the temp file, so a failed
// export never leaves a partial output.
class AtomicFile {
 public:
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  static Result<std::unique_ptr<AtomicFile>> Create(const std::string& path);

  Status Write(const void* data, size_t size);
  // Writes `count` zero bytes (padding between aligned blocks).
  Status WriteZeros(size_t count);
  // Bytes written so far.
  uint64_t offset() const { return offset_; }
  // Flushes, fsyncs, renames over the target. The object is inert afterwards.
  Status Commit();
  // Removes the temp file now (also done by the destructor).
  void Abandon();

  const std::string& path() const { return path_; }
  // The temp file's descriptor, for streaming serializers; offset() does not see such writes.
  int fd() const { return fd_; }

 private:
  AtomicFile() = default;
  std::string path_;
  std::string temp_path_;
  CleanupOnSignal
      temp_on_signal_;  // a fatal signal removes the temp file (common/signal_cleanup.h)
  int fd_ = -1;
  uint64_t offset_ = 0;
};

// Writes `bytes` to `path` atomically.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);

// Directory part of a path ("." when there is none).
std::string DirName(const std::string& path);
// Last component of a path.
std::string BaseName(const std::string& path);
// Joins a directory and a relative path.
std::string JoinPath(const std::string& dir, const std::string& relative);

// True when `relative` is a non-empty relative path without ".." components, so that joining it
// to a directory cannot leave that directory lexically (external-data locations, etc.).
bool IsSafeRelativePath(const std::string& relative);

// True when `path` resolves (following symlinks) to a location inside `dir`. Both must exist.
bool IsInsideDirectory(const std::string& path, const std::string& dir);

}  // namespace quantkit
