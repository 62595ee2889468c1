// Stopping a long quantkit call from outside it: a signal handler (the Python package's Ctrl-C)
// or another thread.
//
// RequestCancel() asks every quantkit call running in this process to stop. Each returns a
// Status with StatusCode::kCancelled at its next model run, and never later than before it
// would write its outputs: a cancelled call writes nothing (its staged files are removed). The
// request stays set until ClearCancel(), so calls started after it fail at once as well.
#pragma once

#include "quantkit/status.h"

namespace quantkit {

// Async-signal-safe: one lock-free atomic store.
void RequestCancel() noexcept;
void ClearCancel() noexcept;
bool CancelRequested() noexcept;
// OK, or kCancelled ("cancelled (interrupted)") once RequestCancel() was called.
Status CheckCancelled();

}  // namespace quantkit
