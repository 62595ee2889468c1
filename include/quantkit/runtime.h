// Process-wide settings every workflow runs under: what the CLI's --threads, --device,
// --max-tensor-mb and --profile set, its signal handling, and the text helpers it prints with.
// Set them before the workflows run; they hold for the whole process.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quantkit/status.h"

namespace quantkit {

// Compute threads of model runs (0: every CPU this process may use). Returns the count in use:
// the request capped at the usable CPUs.
inline constexpr int kMaxComputeThreads = 1 << 20;
Result<int> SetComputeThreads(int threads);

// Where models run: "cpu", "cuda" or "cuda:N"; under a torchrun/srun launch plain "cuda" is the
// GPU of LOCAL_RANK. kInvalidArgument for a malformed name, kUnsupported when CUDA is asked for
// and the build or the machine has none. Weights and activations then stay on that device.
Status UseDevice(const std::string& device);
bool UsingCuda();
// The samples per run the GPU wants when the caller gives none (the CPU defaults stay otherwise).
inline constexpr int64_t kCudaDefaultBatchSize = 128;

// The largest tensor a model run may hold, in MiB: a model that asks for more is bad input
// (kInvalidArgument naming the node), not an allocation failure. 1 to kMaxTensorMb.
inline constexpr int64_t kMaxTensorMb = int64_t{1} << 30;
Status SetMaxTensorMb(int64_t mb);

// A Chrome trace (every ATen op; on a GPU also the CUDA kernels and copies; one scope per model
// node) of what runs between Start and Finish. `path` is created now: an unwritable one fails
// before any work.
class Profile {
 public:
  struct Impl;
  static Result<Profile> Start(const std::string& path);
  Status Finish();  // writes the trace; once
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

// Ctrl-C / SIGTERM remove this process's staging directories and temporary files, then exit as
// the signal would. For programs (the CLI); the library never installs it (a Python process
// keeps its own handlers).
void InstallSignalCleanup();

// Under a multi-rank launch: kUnsupported naming `what` and `shared` (what does share its work),
// since N copies would write the same outputs. Ok outside a launch or with one rank.
Status RefuseUnderLaunch(const std::string& what, const std::string& shared);

// Names taken from untrusted files, printable: control characters and invalid UTF-8 escaped.
std::string EscapeControl(std::string_view text);
// "12.3 MiB".
std::string FormatBytes(int64_t bytes);
// The suffix of a "matches nothing" message: "; did you mean 'a', 'b'?", or when nothing is close
// "; no close match among the 57 <what>: 'a', 'b', ... (57 in all)".
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates,
                       std::string_view what);

}  // namespace quantkit
