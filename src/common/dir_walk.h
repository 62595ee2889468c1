// Directory listings of untrusted trees (data folders): symbolic links are followed, but a link
// that loops (a link to itself: ELOOP, or a link back to a directory being listed) is an error
// naming it, and the depth is bounded (kMaxDirectoryDepth), so a hostile tree can neither recurse
// forever nor surface as an uncaught std::filesystem exception (exit 70). A dangling link is
// skipped, as std::filesystem's is_regular_file() did.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit {

// Deepest nesting of directories below the listed one that a recursive listing enters.
inline constexpr int kMaxDirectoryDepth = 64;

struct DirEntry {
  std::string path;  // dir/name
  std::string name;
  bool is_file = false;       // a regular file (after following links)
  bool is_directory = false;  // a directory (after following links)
};

// The entries of `dir` (not "." and ".."), in no particular order. A missing or unreadable `dir`
// is kIoError/kNotFound; an entry whose link loops is kInvalidArgument naming it.
Result<std::vector<DirEntry>> ListDirectory(const std::string& dir);

// The regular files under `dir` at any depth (links followed) for which `keep(name)` holds, in
// no particular order. A link back to a directory being listed, or nesting deeper than
// kMaxDirectoryDepth, is kInvalidArgument naming the path and the limit.
Result<std::vector<std::string>> ListFilesRecursive(
    const std::string& dir, const std::function<bool(const std::string&)>& keep);

}  // namespace quantkit
