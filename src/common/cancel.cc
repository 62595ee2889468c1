#include "quantkit/cancel.h"

#include <atomic>

namespace quantkit {
namespace {

std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free, "RequestCancel must be async-signal-safe");

}  // namespace

void RequestCancel() noexcept { g_cancel.store(true, std::memory_order_relaxed); }
void ClearCancel() noexcept { g_cancel.store(false, std::memory_order_relaxed); }
bool CancelRequested() noexcept { return g_cancel.load(std::memory_order_relaxed); }

Status CancelledStatus() { return Status(StatusCode::kInternal, kCancelledMessage); }

bool IsCancelled(const Status& status) {
  return status.code() == StatusCode::kInternal && status.message() == kCancelledMessage;
}

Status CheckCancelled() { return CancelRequested() ? CancelledStatus() : Status(); }

}  // namespace quantkit
