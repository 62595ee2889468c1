#include "quantkit/status.h"

namespace quantkit {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kInvalidModel:
      return "invalid model";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

int ExitCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidModel:
    case StatusCode::kNotFound:
      return 2;
    case StatusCode::kUnsupported:
      return 3;
    case StatusCode::kIoError:
      return 4;
    case StatusCode::kResourceExhausted:
      return 5;
    case StatusCode::kInternal:
      return 70;
  }
  return 70;
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_shared<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(state_->code)) + ": " + state_->message;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(state_->code, context + ": " + state_->message);
}

}  // namespace quantkit
