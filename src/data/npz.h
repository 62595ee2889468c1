// NumPy .npz archives read and written whole (np.savez / np.load): small sets of named arrays such
// as QAT checkpoints. Large data archives are streamed by the npz data source instead.
//
// Written: one STORED zip member "<name>.npy" per array (C order, little-endian), atomically.
// Read: the file is hostile input. Only STORED members are accepted (what np.savez and WriteNpz
// write: no decompression, so nothing can declare more bytes than the file holds), each member's
// size is checked against the file size before it is read, its CRC-32 is verified, and its .npy
// bytes go through ParseNpy. Member names must end in ".npy" and be unique.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::data {

// Most members ReadNpz accepts (each costs a zip directory entry; numpy has no limit).
inline constexpr int64_t kMaxNpzMembers = int64_t{1} << 20;

struct NpzArray {
  std::string name;  // the member name without ".npy" (np.load's key)
  ir::Tensor tensor;
};

// Writes `arrays` to `path` atomically (a temp file that a failure or a fatal signal removes).
// kIoError naming the file and the system's reason; kInvalidArgument for a duplicate or empty name.
Status WriteNpz(const std::string& path, const std::vector<NpzArray>& arrays);

// Reads every member of `path`, in archive order. kNotFound for a missing file, kInvalidArgument
// for anything that is not such an archive (the message names the file and, where it applies, the
// member).
Result<std::vector<NpzArray>> ReadNpz(const std::string& path);

}  // namespace quantkit::data
