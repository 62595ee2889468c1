// Where a command spends its time, as torch's own profiler sees it (issue 26: the GPU route is
// profiled before it is tuned). Records every ATen op on the host and, when the run uses a CUDA
// device, the CUDA kernels, copies and synchronisations (Kineto/CUPTI), plus quantkit's scopes:
// one per model node (named as the interpreter's messages name it) and "qk::observe" around what
// observers take from one tensor (calibration statistics, copies to the host). Written as a Chrome
// trace (chrome://tracing, Perfetto; bench/gpu/trace_summary.py sums it by name). `quantkit
// --profile FILE` (also QUANTKIT_PROFILE) wraps a whole command in one (docs/gpu.md).
#pragma once

#include <memory>
#include <string>

#include "quantkit/status.h"

namespace quantkit::runtime {

class Profile {
 public:
  // Starts recording. `path` is created (empty) now, so an unwritable path fails before any work
  // (kInvalidArgument naming it); kUnsupported when this libtorch cannot profile, or when another
  // profile is already recording in this process.
  static Result<std::unique_ptr<Profile>> Start(const std::string& path, bool cuda);
  // Stops recording and writes the trace to the path given to Start. Once only.
  Status Finish();
  // Stops recording if Finish was not called; writes nothing then.
  ~Profile();

  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

 private:
  explicit Profile(std::string path) : path_(std::move(path)) {}
  std::string path_;
  bool recording_ = true;
};

}  // namespace quantkit::runtime
