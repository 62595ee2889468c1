// What a command removes when SIGINT, SIGTERM or SIGHUP ends it mid-write: the staging directory of
// an ArtifactSet, the temp file of an AtomicFile, an output directory the run created. Without it
// Ctrl-C (or a job scheduler's SIGTERM) left `.quantkit-staging-*` and `*.tmp.*` behind.
//
// Writers register their temporary paths for as long as they exist (CleanupOnSignal, RAII). The
// CLI installs the handler once (InstallSignalCleanup); the library never does (a Python process
// keeps its own SIGINT handling: there the ArtifactSet destructors clean up as usual). The handler
// does only async-signal-safe work (getdents64, unlinkat, rmdir on fixed buffers), then lets the
// signal end the process as it would have (exit status "killed by SIGINT").
//
// SIGKILL cannot be caught: ArtifactSet::Open removes the staging directories that a dead run left
// in the directory it has just locked (a live writer would hold the lock).
#pragma once

#include <signal.h>

#include <string>

namespace quantkit {

enum class CleanupKind {
  kFile,             // unlink it
  kFlatDirectory,    // unlink its entries (no subdirectories), then rmdir it
  kDirectoryIfEmpty  // rmdir it (fails harmlessly when something is in it)
};

// Registers `path` for removal on a fatal signal while this object lives. Best effort: when the
// fixed table (kMaxCleanupPaths) is full or the path is too long, nothing is registered.
class CleanupOnSignal {
 public:
  CleanupOnSignal() = default;
  CleanupOnSignal(const std::string& path, CleanupKind kind);
  ~CleanupOnSignal() { Release(); }
  CleanupOnSignal(const CleanupOnSignal&) = delete;
  CleanupOnSignal& operator=(const CleanupOnSignal&) = delete;
  CleanupOnSignal(CleanupOnSignal&& other) noexcept : slot_(other.slot_) { other.slot_ = -1; }
  CleanupOnSignal& operator=(CleanupOnSignal&& other) noexcept;

  // Unregisters now (the path was committed or removed).
  void Release();

 private:
  int slot_ = -1;
};

inline constexpr int kMaxCleanupPaths = 64;

// Held while a set of files is moved into place (ArtifactSet::Commit): the fatal signals are
// blocked in this thread, and a handler running in another thread waits (at most
// kCommitWaitMs) for the moves to finish, so a signal cannot leave half the new files in place
// and delete the rest.
class CommitGuard {
 public:
  CommitGuard();
  ~CommitGuard();
  CommitGuard(const CommitGuard&) = delete;
  CommitGuard& operator=(const CommitGuard&) = delete;

 private:
  sigset_t saved_mask_;  // this thread's mask before, restored after
};

inline constexpr int kCommitWaitMs = 2000;

// Installs the SIGINT/SIGTERM/SIGHUP handler (idempotent). Signals whose disposition is "ignore"
// (a process started with nohup) stay ignored.
void InstallSignalCleanup();

}  // namespace quantkit
