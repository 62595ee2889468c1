// Writing an output file atomically (style.md §9): the bytes go to <path>.tmp.<pid>, which is then
// renamed over <path>, so readers never see a half-written file.
#pragma once

#include <string>

#include "quantkit/status.h"

namespace quantkit {

// kIoError naming `path` when the temp file cannot be created, written or renamed (the temp file
// is removed on failure).
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace quantkit
