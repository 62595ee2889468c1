// The files one command writes into an output directory, written as one unit.
//
// Two runs writing into the same -o directory used to interleave (summary and cache of one
// method, plan.json of the other). An ArtifactSet prevents that and never leaves a partial set:
//
//   1. Open() creates the directory if needed and takes an exclusive flock on it (the directory's
//      own descriptor: no lock file is left behind). A second run fails at once, before any
//      compute, naming the directory; the lock dies with the process, so a crash cannot wedge it.
//   2. Every target that exists but is not a regular file (a directory named plan.json) is an
//      error before anything is written.
//   3. Writers write to Stage(name): a file inside a private staging directory
//      (DIR/.quantkit-staging-XXXXXX) on the same filesystem.
//   4. Commit() renames every staged file over its target (atomic per file, and serialized by
//      the lock) and removes the staging directory. Destroying an uncommitted set removes the
//      staging directory, and DIR itself when Open created it: a failed run leaves nothing.
//   5. A run ended by SIGINT/SIGTERM/SIGHUP removes them too (common/signal_cleanup.h, once the
//      CLI installed the handler); a signal during Commit waits for it to finish. A run killed
//      outright (SIGKILL, a crash) cannot: the next Open of DIR, holding the lock, knows that no
//      live run owns a staging directory there and removes the ones it finds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/signal_cleanup.h"
#include "quantkit/status.h"

namespace quantkit {

class ArtifactSet {
 public:
  ~ArtifactSet();
  ArtifactSet(const ArtifactSet&) = delete;
  ArtifactSet& operator=(const ArtifactSet&) = delete;

  // `names` are the file names (no '/') this run may write into `dir`.
  static Result<std::unique_ptr<ArtifactSet>> Open(const std::string& dir,
                                                   const std::vector<std::string>& names);

  // Where a writer writes `name` (one of the names given to Open) until Commit().
  std::string Stage(const std::string& name) const;
  // The same for a name not given to Open (outputs whose names are known only while running,
  // e.g. `run`'s outputs and dumps): added after the same non-file check as Open's.
  Result<std::string> StageNew(const std::string& name);
  // Final path of `name`: DIR/name.
  std::string Target(const std::string& name) const;
  // Moves every staged file into DIR. Names never staged are left alone (kept from before).
  // Returns the final paths written, in the order of Open's names.
  Result<std::vector<std::string>> Commit();

 private:
  ArtifactSet() = default;
  Status CheckTarget(const std::string& name) const;
  void RemoveStaging();
  std::string dir_;
  std::string staging_;
  CleanupOnSignal staging_on_signal_, created_dir_on_signal_;
  std::vector<std::string> names_;
  int lock_fd_ = -1;
  bool created_dir_ = false;  // Open created DIR: removed again when nothing was committed
  bool committed_ = false;
};

}  // namespace quantkit
