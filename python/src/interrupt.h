// Ctrl-C during a long call. Python runs its SIGINT handler only between bytecodes, so a C++ call
// that released the GIL used to run to its end, then write all its files, before
// KeyboardInterrupt. While a call runs under an InterruptScope, SIGINT also asks quantkit to
// cancel (quantkit/cancel.h): the call stops at its next model run and writes nothing, and the
// binding then raises what Python's own handler raises (KeyboardInterrupt by default).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <utility>

namespace quantkit::python {

// While one exists (any thread; scopes nest), SIGINT also cancels the running quantkit calls,
// then does what the previous handler does. Left out when SIGINT is ignored or not Python's.
// Create and destroy it with the GIL held.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  // SIGINT arrived since this scope (or the outermost one) began.
  bool interrupted() const;
};

// Raises the exception of the pending signal (Python's handler runs now), KeyboardInterrupt when
// the handler raised none. Needs the GIL.
[[noreturn]] void RaiseInterrupt();

// f() with the GIL released under an InterruptScope; raises as RaiseInterrupt when SIGINT came
// during it, else returns f's value (a Status or Result, still to be unwrapped).
template <typename F>
auto CallInterruptible(F&& f) {
  std::optional<decltype(f())> out;
  bool interrupted = false;
  {
    InterruptScope scope;
    {
      pybind11::gil_scoped_release release;
      out.emplace(f());
    }
    interrupted = scope.interrupted();
  }
  if (interrupted) RaiseInterrupt();
  return std::move(*out);
}

}  // namespace quantkit::python
