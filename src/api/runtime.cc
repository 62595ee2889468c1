// include/quantkit/runtime.h over runtime/, distributed/ and common/: the process-wide settings.
// EscapeControl, FormatBytes and InstallSignalCleanup are common/'s own definitions (the public
// header declares them).
#include "quantkit/runtime.h"

#include "common/check.h"
#include "distributed/launch.h"
#include "runtime/device.h"
#include "runtime/profiler.h"
#include "runtime/tensor_budget.h"
#include "runtime/threads.h"

namespace quantkit {

static_assert(kCudaDefaultBatchSize == runtime::kCudaDefaultBatchSize);
static_assert(kMaxTensorMb == runtime::kMaxTensorBudgetMb);

Result<int> SetComputeThreads(int threads) {
  QK_RETURN_IF_NOT(threads >= 0 && threads <= kMaxComputeThreads, StatusCode::kInvalidArgument,
                   "threads must be in [0, {}], got {}", kMaxComputeThreads, threads);
  return runtime::SetComputeThreads(threads);
}

Status UseDevice(const std::string& device) { return distributed::SelectDevice(device).status(); }

bool UsingCuda() { return runtime::DefaultDevice().is_cuda(); }

Status SetMaxTensorMb(int64_t mb) { return runtime::SetMaxTensorMb(mb); }

struct Profile::Impl {
  std::unique_ptr<runtime::Profile> profile;
};

Result<Profile> Profile::Start(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Profile> started,
                      runtime::Profile::Start(path, runtime::DefaultDevice().is_cuda()));
  Profile p;
  p.impl_ = std::make_shared<Impl>();
  p.impl_->profile = std::move(started);
  return p;
}

Status Profile::Finish() {
  QK_RETURN_IF_NOT(impl_ != nullptr && impl_->profile != nullptr, StatusCode::kInvalidArgument,
                   "the profile was not started or is finished already");
  Status written = impl_->profile->Finish();
  impl_->profile.reset();
  return written;
}

Status RefuseUnderLaunch(const std::string& what, const std::string& shared) {
  return distributed::RefuseUnderLaunch(what, shared);
}

}  // namespace quantkit
