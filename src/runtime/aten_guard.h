// ATen/libtorch exceptions as a Status (internal to runtime/ and train/: libtorch types).
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <string>

#include "common/check.h"

namespace quantkit::runtime {

// Runs `body` (returning Status) and turns what ATen or libtorch throws into a Status naming
// `what`: out of memory as kResourceExhausted, anything else as kInternal.
template <typename F>
Status Guarded(const std::string& what, F&& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return MakeStatus(StatusCode::kInternal, "{}: {}", what, e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return MakeStatus(StatusCode::kResourceExhausted, "{}: out of memory", what);
  } catch (const std::exception& e) {
    return MakeStatus(StatusCode::kInternal, "{}: {}", what, e.what());
  }
}

}  // namespace quantkit::runtime
