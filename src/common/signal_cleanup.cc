#include "common/signal_cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace quantkit {
namespace {

constexpr size_t kMaxCleanupPath = 4096;

enum SlotState : int { kFree = 0, kFilling = 1, kActive = 2 };

// Fixed storage: the handler may not allocate. A slot is filled while kFilling and read by the
// handler only when kActive.
struct Slot {
  std::atomic<int> state{kFree};
  CleanupKind kind = CleanupKind::kFile;
  char path[kMaxCleanupPath] = {};
};
Slot slots[kMaxCleanupPaths];
std::atomic<int> commits_in_progress{0};

sigset_t FatalSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Unlinks the entries of a flat directory (getdents64 and unlinkat are async-signal-safe; readdir
// is not), rereading from the start until a pass removes nothing, then removes the directory.
void RemoveFlatDirectory(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (int pass = 0; pass < 16; ++pass) {
      int removed = 0;
      ::lseek(fd, 0, SEEK_SET);
      long n = 0;
      while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n;) {
          const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
          const char* name = d->d_name;
          const bool dot =
              name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
          if (!dot && ::unlinkat(fd, name, 0) == 0) ++removed;
          off += d->d_reclen;
        }
      }
      if (removed == 0) break;
    }
    ::close(fd);
  }
  ::rmdir(path);
}

void RemoveAll(CleanupKind kind) {
  for (Slot& s : slots) {
    if (s.state.load(std::memory_order_acquire) != kActive || s.kind != kind) continue;
    switch (kind) {
      case CleanupKind::kFile:
        ::unlink(s.path);
        break;
      case CleanupKind::kFlatDirectory:
        RemoveFlatDirectory(s.path);
        break;
      case CleanupKind::kDirectoryIfEmpty:
        ::rmdir(s.path);
        break;
    }
  }
}

void OnFatalSignal(int sig) {
  const int saved_errno = errno;
  // A commit in another thread (which blocks these signals) finishes first.
  for (int waited = 0;
       commits_in_progress.load(std::memory_order_acquire) > 0 && waited < kCommitWaitMs;
       ++waited) {
    const timespec ms{0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
  // Temp files first (some live in staging directories), then staging directories, then the
  // output directories the run created, which are empty by then unless the user put files there.
  RemoveAll(CleanupKind::kFile);
  RemoveAll(CleanupKind::kFlatDirectory);
  RemoveAll(CleanupKind::kDirectoryIfEmpty);
  errno = saved_errno;
  // SA_RESETHAND restored the default action: the signal, pending until this handler returns,
  // then ends the process as it would have without quantkit's handler.
  ::raise(sig);
}

}  // namespace

CleanupOnSignal::CleanupOnSignal(const std::string& path, CleanupKind kind) {
  if (path.empty() || path.size() >= kMaxCleanupPath) return;
  for (int i = 0; i < kMaxCleanupPaths; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acquire))
      continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].kind = kind;
    slots[i].state.store(kActive, std::memory_order_release);
    slot_ = i;
    return;
  }
}

CleanupOnSignal& CleanupOnSignal::operator=(CleanupOnSignal&& other) noexcept {
  if (this != &other) {
    Release();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

void CleanupOnSignal::Release() {
  if (slot_ < 0) return;
  slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

CommitGuard::CommitGuard() {
  const sigset_t fatal = FatalSignals();
  ::pthread_sigmask(SIG_BLOCK, &fatal, &saved_mask_);
  commits_in_progress.fetch_add(1, std::memory_order_acq_rel);
}

CommitGuard::~CommitGuard() {
  commits_in_progress.fetch_sub(1, std::memory_order_acq_rel);
  ::pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
}

void InstallSignalCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup
      struct sigaction sa {};
      sa.sa_handler = OnFatalSignal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESETHAND;
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

}  // namespace quantkit
