// Checks on a path before it is opened for reading (implemented in file_util.cc).
#pragma once

#include <string>

#include "quantkit/status.h"

namespace quantkit {

// OK when `path` is a regular file (symlinks followed). A directory, FIFO, socket or device is
// kInvalidArgument naming the kind, checked without opening it (opening a FIFO blocks forever
// without a writer; a device can stream without end); a missing path is kNotFound. Every reader
// of untrusted paths goes through this (MappedFile::Open does).
Status CheckRegularFile(const std::string& path);
// OK when `path` may be written by an atomic replace: it does not exist, or it is a regular file.
// A directory, FIFO, device or symbolic link there is kInvalidArgument naming `option` and the
// kind, so that a command refuses it before its long pass rather than failing after it (what
// ArtifactSet does for the files of an output directory).
Status CheckOutputFile(const std::string& path, const std::string& option);
// "a FIFO", "a directory", "a socket", ... for a stat() mode.
const char* FileTypeName(unsigned mode);

}  // namespace quantkit
