// Stopping a long quantkit call from outside it: a signal handler (the Python package's Ctrl-C)
// or another thread.
//
// RequestCancel() asks every quantkit call running in this process to stop. Each returns the
// CancelledStatus() at its next model run, and never later than before it would write its
// outputs: a cancelled call writes nothing (its staged files are removed). The request stays set
// until ClearCancel(), so calls started after it fail at once as well.
//
// The status is StatusCode::kInternal with the message kCancelledMessage: a code of its own
// (exit 130, as a shell reports Ctrl-C) belongs in quantkit/status.h, whose every change
// recompiles the whole project, so it comes with the next change there. Tell a cancellation
// apart with IsCancelled(status).
#pragma once

#include "quantkit/status.h"

namespace quantkit {

// Async-signal-safe: one lock-free atomic store.
void RequestCancel() noexcept;
void ClearCancel() noexcept;
bool CancelRequested() noexcept;
inline constexpr const char* kCancelledMessage = "cancelled (interrupted)";
Status CancelledStatus();
bool IsCancelled(const Status& status);
// OK, or CancelledStatus() once RequestCancel() was called.
Status CheckCancelled();

}  // namespace quantkit
