// quantkit Status -> Python exception. A failed Status becomes a quantkit.errors exception whose
// class follows the StatusCode (InvalidArgumentError is also a ValueError, IoError an OSError...)
// and which carries the one-line message, the code name and the CLI's exit code (README table).
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <utility>

#include "quantkit/status.h"

namespace quantkit::python {

// Thrown by the bindings, translated by the handler RegisterErrors installs.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(Status status)
      : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T Unwrap(Result<T>&& result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

void RegisterErrors(pybind11::module_& m);

}  // namespace quantkit::python
