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
// "a FIFO", "a directory", "a socket", ... for a stat() mode.
const char* FileTypeName(unsigned mode);

}  // namespace quantkit
