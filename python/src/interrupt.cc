#include "interrupt.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "quantkit/cancel.h"

namespace py = pybind11;

namespace quantkit::python {
namespace {

std::mutex g_mutex;           // guards the fields below (never taken in the handler)
int g_depth = 0;              // live scopes
bool g_installed = false;     // our handler is SIGINT's
struct sigaction g_previous;  // the handler ours replaced (Python's), restored by the last scope
std::atomic<bool> g_interrupted{false};

// Cancels, then hands the signal on to Python's handler (which only marks it pending: both are
// async-signal-safe).
void OnSigint(int signal, siginfo_t* info, void* context) {
  g_interrupted.store(true, std::memory_order_relaxed);
  RequestCancel();
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  }
}

}  // namespace

InterruptScope::InterruptScope() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_depth++ > 0) return;
  g_interrupted.store(false);
  ClearCancel();
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  // SIG_IGN: the user chose to ignore Ctrl-C; SIG_DFL: it ends the process anyway (not Python's).
  if (!(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL)) {
    return;
  }
  struct sigaction ours {};
  ours.sa_sigaction = &OnSigint;
  ours.sa_flags = SA_SIGINFO | (current.sa_flags & SA_ONSTACK);
  sigemptyset(&ours.sa_mask);
  g_previous = current;
  g_installed = sigaction(SIGINT, &ours, nullptr) == 0;
}

InterruptScope::~InterruptScope() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_depth > 0) return;
  if (g_installed) sigaction(SIGINT, &g_previous, nullptr);
  g_installed = false;
  ClearCancel();
}

bool InterruptScope::interrupted() const { return g_interrupted.load(std::memory_order_relaxed); }

void RaiseInterrupt() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw py::error_already_set();
}

}  // namespace quantkit::python
