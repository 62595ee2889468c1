// Error-propagation macros (see docs/style: errors are values at boundaries).
//
//   QK_RETURN_IF_ERROR(expr)            return the Status of expr if it failed
//   QK_ASSIGN_OR_RETURN(lhs, expr)      lhs = value of Result expr, or return its Status
//   QK_RETURN_IF_NOT(cond, code, fmt, args...)   reject untrusted data with a formatted message
//   QK_CHECK(cond, fmt, args...)        internal invariant only: throws InternalError
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "quantkit/status.h"

namespace quantkit {

// Thrown only for violated internal invariants (bugs), never for bad user data. Public APIs
// catch it and return StatusCode::kInternal.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <typename... Args>
Status MakeStatus(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace quantkit

#define QK_CONCAT_INNER_(a, b) a##b
#define QK_CONCAT_(a, b) QK_CONCAT_INNER_(a, b)

#define QK_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::quantkit::Status qk_status_ = (expr);  \
    if (!qk_status_.ok()) return qk_status_; \
  } while (0)

#define QK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define QK_ASSIGN_OR_RETURN(lhs, expr) \
  QK_ASSIGN_OR_RETURN_IMPL_(QK_CONCAT_(qk_result_, __LINE__), lhs, expr)

#define QK_RETURN_IF_NOT(cond, code, ...)                            \
  do {                                                               \
    if (!(cond)) return ::quantkit::MakeStatus((code), __VA_ARGS__); \
  } while (0)

#define QK_CHECK(cond, ...)                                                                    \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::quantkit::InternalError(fmt::format("{}:{}: check failed: {}: {}", __FILE__,     \
                                                  __LINE__, #cond, fmt::format(__VA_ARGS__))); \
  } while (0)
