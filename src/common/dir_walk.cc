#include "common/dir_walk.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// One directory on the path being listed, identified by device and inode: a link that leads back
// to one of them would be listed forever.
using DirId = std::pair<dev_t, ino_t>;

Status Walk(const std::string& dir, int depth, std::set<DirId>* open_dirs,
            const std::function<bool(const std::string&)>& keep, std::vector<std::string>* out) {
  QK_RETURN_IF_NOT(
      depth <= kMaxDirectoryDepth, StatusCode::kInvalidArgument,
      "{}: directories nested deeper than {} levels (kMaxDirectoryDepth); a symbolic link loop?",
      dir, kMaxDirectoryDepth);
  struct stat st {};
  QK_RETURN_IF_NOT(::stat(dir.c_str(), &st) == 0, StatusCode::kIoError, "{}: {}", dir,
                   std::strerror(errno));
  const DirId id{st.st_dev, st.st_ino};
  QK_RETURN_IF_NOT(open_dirs->insert(id).second, StatusCode::kInvalidArgument,
                   "{}: symbolic link loop (leads back to a directory that contains it)", dir);
  QK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirectory(dir));
  for (const DirEntry& e : entries) {
    if (e.is_file && keep(e.name)) out->push_back(e.path);
    if (e.is_directory) QK_RETURN_IF_ERROR(Walk(e.path, depth + 1, open_dirs, keep, out));
  }
  open_dirs->erase(id);
  return Status::Ok();
}

}  // namespace

Result<std::vector<DirEntry>> ListDirectory(const std::string& dir) {
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) {
    const int err = errno;
    return MakeStatus(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                      "{}: cannot list directory: {}", dir, std::strerror(err));
  }
  std::vector<DirEntry> entries;
  while (true) {
    errno = 0;
    const dirent* ent = ::readdir(d.get());
    if (ent == nullptr) {
      QK_RETURN_IF_NOT(errno == 0, StatusCode::kIoError, "{}: cannot list directory: {}", dir,
                       std::strerror(errno));
      break;
    }
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    DirEntry e;
    e.name = name;
    e.path = JoinPath(dir, name);
    struct stat st {};
    if (::stat(e.path.c_str(), &st) != 0) {
      const int err = errno;
      QK_RETURN_IF_NOT(err != ELOOP, StatusCode::kInvalidArgument, "{}: symbolic link loop ({})",
                       e.path, std::strerror(err));
      continue;  // a dangling link or an entry removed meanwhile
    }
    e.is_file = S_ISREG(st.st_mode);
    e.is_directory = S_ISDIR(st.st_mode);
    entries.push_back(std::move(e));
  }
  return entries;
}

Result<std::vector<std::string>> ListFilesRecursive(
    const std::string& dir, const std::function<bool(const std::string&)>& keep) {
  std::vector<std::string> out;
  std::set<DirId> open_dirs;
  QK_RETURN_IF_ERROR(Walk(dir, 0, &open_dirs, keep, &out));
  return out;
}

}  // namespace quantkit
