// What libtorch's checkpoint reader would allocate from a declared size, checked before it reads
// (issue 27's checkpoint_fuzzer: a 3-byte edit of a valid checkpoint made torch::jit::Unpickler
// reserve a 1.8 GB string for a BINUNICODE length, from a 60 KB file). A quantkit checkpoint is a
// PyTorch zip archive with STORED records; its pickles hold small strings. Refused here: a record
// whose declared size exceeds the file, and in each .pkl record an opcode whose declared length
// or memo index reaches past the record's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quantkit/status.h"

namespace quantkit::train {

// Scans one pickle (protocol <= 5 opcodes): every length-prefixed argument must fit in the bytes
// that follow it, every memo index must be below the pickle's size. Stops at STOP or at an opcode
// it does not know (the unpickler refuses that one itself before reading on). `where` names the
// record in messages.
Status CheckPickleLengths(const uint8_t* data, size_t size, const std::string& where);

// Opens the zip archive in memory, checks every record's declared size against the archive's size
// and runs CheckPickleLengths on each record whose name ends in ".pkl". `path` names the file.
Status PrecheckCheckpointArchive(const uint8_t* data, size_t size, const std::string& path);

}  // namespace quantkit::train
