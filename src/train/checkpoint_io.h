// Reading and writing QAT checkpoint files (internal to src/train/; libtorch types). A checkpoint
// given to `qat --resume` is untrusted input: every failure of libtorch's reader is bad input
// naming the file (it was exit 70 with "PytorchStreamReader failed reading zip archive"), and
// writing never lets an I/O error through libtorch's zip writer (on a full disk it threw from a
// destructor: SIGABRT, a .tmp left behind).
#pragma once

#include <torch/serialize.h>

#include <functional>
#include <string>

#include "quantkit/status.h"

namespace quantkit::train {

// Reads the regular file `path` into `archive` (onto `device`). kNotFound for a missing file,
// kInvalidArgument for a special file or anything libtorch cannot read.
Status ReadCheckpointArchive(const std::string& path, const c10::optional<at::Device>& device,
                             torch::serialize::InputArchive* archive);

// Runs `body` on a checkpoint's contents: libtorch's exceptions (a missing key, a value of the
// wrong kind) become kInvalidArgument naming `path`.
Status ReadingCheckpoint(const std::string& path, const std::function<Status()>& body);

// Serializes `archive` and writes it to `path` atomically (common/file_util.h AtomicFile: a temp
// file that a failure or a fatal signal removes). kIoError naming the file and the system's reason.
Status WriteCheckpointArchive(torch::serialize::OutputArchive& archive, const std::string& path);

}  // namespace quantkit::train
