// Locates ../shared/testvectors for tests: $QK_TESTVECTORS_DIR, else <source>/../shared/testvectors
// (CI: a fresh clone with shared/ beside it), else /work/shared/testvectors (worktrees).
// Returns "" when none exists; tests then FAIL (never skip) so missing vectors cannot hide.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace quantkit::testing {

inline std::string TestVectorsDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("QK_TESTVECTORS_DIR")) {
    if (fs::is_directory(env)) return env;
  }
  for (const char* candidate : {QK_SOURCE_DIR "/../shared/testvectors", "/work/shared/testvectors"}) {
    if (fs::is_directory(candidate)) return fs::canonical(candidate).string();
  }
  return "";
}

}  // namespace quantkit::testing
