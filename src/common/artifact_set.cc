#include "common/artifact_set.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/check.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "quantkit/cancel.h"

namespace quantkit {
namespace {

constexpr const char* kStagingPrefix = ".quantkit-staging-";

// Called with DIR locked: every live writer holds that lock, so a staging directory found now
// belongs to a run that died without cleaning up (SIGKILL, a timeout, a crash). Removed, or
// they pile up with every such run.
void RemoveStaleStaging(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st {};
    const std::string path = JoinPath(dir, name);
    if (name.rfind(kStagingPrefix, 0) == 0 && ::lstat(path.c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      stale.push_back(path);
    }
  }
  ::closedir(d);
  for (const std::string& path : stale) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // best effort: what is left is retried next time
  }
}

}  // namespace

ArtifactSet::~ArtifactSet() {
  RemoveStaging();
  if (created_dir_ && !committed_) ::rmdir(dir_.c_str());  // only if still empty
  if (lock_fd_ >= 0) ::close(lock_fd_);                    // releases the flock
}

Result<std::unique_ptr<ArtifactSet>> ArtifactSet::Open(const std::string& dir,
                                                       const std::vector<std::string>& names) {
  QK_RETURN_IF_NOT(!dir.empty(), StatusCode::kInvalidArgument, "no output directory given");
  std::error_code ec;
  const bool existed = std::filesystem::exists(dir, ec);
  std::filesystem::create_directories(dir, ec);
  QK_RETURN_IF_NOT(!ec, StatusCode::kIoError, "{}: cannot create output directory: {}", dir,
                   ec.message());
  std::unique_ptr<ArtifactSet> set(new ArtifactSet());
  set->dir_ = dir;
  set->created_dir_ = !existed;
  set->names_ = names;
  set->lock_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (set->lock_fd_ < 0) {
    return MakeStatus(StatusCode::kIoError, "{}: cannot open output directory: {}", dir,
                      std::strerror(errno));
  }
  if (::flock(set->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    QK_RETURN_IF_NOT(
        err != EWOULDBLOCK, StatusCode::kIoError,
        "{}: another quantkit run is writing into this directory (it is locked); wait for it "
        "or choose another -o",
        dir);
    return MakeStatus(StatusCode::kIoError, "{}: cannot lock output directory: {}", dir,
                      std::strerror(err));
  }
  if (set->created_dir_)
    set->created_dir_on_signal_ = CleanupOnSignal(dir, CleanupKind::kDirectoryIfEmpty);
  // Refuse before anything is written: a target that exists must be a file we may replace.
  for (const std::string& name : names) QK_RETURN_IF_ERROR(set->CheckTarget(name));
  RemoveStaleStaging(dir);
  std::string templ = JoinPath(dir, std::string(kStagingPrefix) + "XXXXXX");
  QK_RETURN_IF_NOT(::mkdtemp(templ.data()) != nullptr, StatusCode::kIoError,
                   "{}: cannot create a staging directory: {}", dir, std::strerror(errno));
  set->staging_ = templ;
  set->staging_on_signal_ = CleanupOnSignal(templ, CleanupKind::kFlatDirectory);
  return set;
}

Status ArtifactSet::CheckTarget(const std::string& name) const {
  QK_RETURN_IF_NOT(
      !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos,
      StatusCode::kInvalidArgument, "'{}' is not a file name", name);
  struct stat st {};
  const std::string target = Target(name);
  if (::lstat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "{}: is {}, not a file quantkit may replace; nothing was written", target,
                      S_ISLNK(st.st_mode) ? "a symbolic link" : FileTypeName(st.st_mode));
  }
  return Status::Ok();
}

std::string ArtifactSet::Stage(const std::string& name) const {
  QK_CHECK(std::find(names_.begin(), names_.end(), name) != names_.end(),
           "'{}' is not an artifact of this set", name);
  return JoinPath(staging_, name);
}

Result<std::string> ArtifactSet::StageNew(const std::string& name) {
  QK_RETURN_IF_NOT(!staging_.empty(), StatusCode::kInternal, "{}: artifact set already committed",
                   dir_);
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
    QK_RETURN_IF_ERROR(CheckTarget(name));
    names_.push_back(name);
  }
  return JoinPath(staging_, name);
}

std::string ArtifactSet::Target(const std::string& name) const { return JoinPath(dir_, name); }

Result<std::vector<std::string>> ArtifactSet::Commit() {
  QK_RETURN_IF_NOT(!staging_.empty(), StatusCode::kInternal, "{}: artifact set committed twice",
                   dir_);
  // A cancelled run writes nothing: the staged files go with the staging directory.
  QK_RETURN_IF_ERROR(CheckCancelled());
  const CommitGuard guard;  // a signal now waits for the renames: never half a set
  std::vector<std::string> written;
  for (const std::string& name : names_) {
    const std::string staged = JoinPath(staging_, name);
    struct stat st {};
    if (::lstat(staged.c_str(), &st) != 0) continue;  // not produced by this run
    const std::string target = Target(name);
    QK_RETURN_IF_NOT(::rename(staged.c_str(), target.c_str()) == 0, StatusCode::kIoError,
                     "{}: cannot move the new file into place: {}", target, std::strerror(errno));
    written.push_back(target);
  }
  committed_ = true;
  created_dir_on_signal_.Release();
  RemoveStaging();
  return written;
}

void ArtifactSet::RemoveStaging() {
  if (staging_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);  // best effort: a failed run's files only
  staging_on_signal_.Release();
  staging_.clear();
}

}  // namespace quantkit
