// File helpers shared by every writer and reader: outputs are written atomically (temp file in
// the same directory, fsync, rename), so a failure never leaves a partial output; inputs are
// only ever opened read-only.
#pragma once

#include <string>

#include "quantkit/status.h"

namespace quantkit {

// Reads a whole file. Errors name the path.
Result<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` via `path.tmp.<pid>` + rename. On failure the temp file is removed
// and `path` is untouched.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

}  // namespace quantkit
