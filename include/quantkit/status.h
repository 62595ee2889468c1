// quantkit::Status and quantkit::Result<T>: errors as values at every public boundary.
//
// A Status is OK when its state pointer is null, so success costs one pointer compare. A failed
// Status carries a code and a one-line message that names what the user can find (file, node,
// op type and opset, tensor, the value seen and the value expected). The CLI maps codes to exit
// codes (ExitCodeFor).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace quantkit {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // the user asked for something impossible (bad option, bad shape)
  kInvalidModel,       // a model or data file is corrupt or violates the ONNX rules
  kUnsupported,        // valid input that quantkit does not handle (unknown op, dtype)
  kNotFound,           // a file, tensor or node that was named does not exist
  kIoError,            // reading or writing failed
  kResourceExhausted,  // out of memory / too large
  kInternal,           // a quantkit bug
};

const char* StatusCodeName(StatusCode code);

// Exit codes of the CLI: 0 success, 1 findings (lint/diagnose warnings), 2 bad input,
// 3 unsupported, 4 I/O, 5 resources, 70 internal error.
int ExitCodeFor(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "code: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context + ": "` (for adding file names).
  Status WithContext(const std::string& context) const;

  // Marks a Status as deliberately ignored.
  void IgnoreError() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result constructed from OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace quantkit
