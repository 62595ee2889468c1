// The QAT checkpoint file (internal to src/train/; libtorch types). It is an .npz archive that
// np.load reads (data/npz.h), and libtorch never parses it: a checkpoint given to `qat --resume` is
// untrusted input, and libtorch's TorchScript archive reader, used until issue 27, crashed on
// edited files (checkpoint_fuzzer: a SEGV in its TorchScript parser, a 1.8 GB reserve in its
// unpickler). Members (docs/qat.md):
//   format_version                        int64 scalar, kCheckpointFormatVersion
//   step                                  int64 scalar >= 0: optimizer steps done
//   param/<name>                          the trained parameters (float32)
//   best/<name>                           the best parameters so far (optional)
//   value/<key>                           float64 scalars: the pipeline's bookkeeping
//   optimizer/sgd or optimizer/adamw      int64 scalar 1: whose state follows
//   optimizer/sgd/momentum_buffer/<name>  once the parameter has been updated with momentum
//   optimizer/adamw/{exp_avg,exp_avg_sq,step}/<name>  once the parameter has been updated
#pragma once

#include <torch/optim.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/npz.h"
#include "quantkit/status.h"
#include "train/qat_trainer.h"

namespace quantkit::train {

inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointFile {
  int64_t step = 0;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  std::map<std::string, ir::Tensor> arrays;  // every member, by name
};

// Reads `path` and checks its frame: an .npz archive (data::ReadNpz's hostile-input rules), this
// format version, a step count, one optimizer kind, at least one parameter, and every member under
// a prefix above. kNotFound / kInvalidArgument naming the file (and the member).
Result<CheckpointFile> ReadCheckpointFile(const std::string& path);

// The value/<key> members of `file` as key -> number; kInvalidArgument naming `path` and the member
// when one is not a finite float64 scalar.
Result<std::map<std::string, double>> CheckpointValues(const CheckpointFile& file,
                                                       const std::string& path);

// Writes `arrays` and the format version to `path` atomically (a temp file that a failure or a
// fatal signal removes). kIoError naming the file and the system's reason.
Status WriteCheckpointFile(const std::string& path, std::vector<data::NpzArray> arrays);

// The member `name` of `file` as a tensor beside `like`: float, `like`'s shape, finite values.
// kInvalidArgument naming `path` and the member otherwise (another model or plan).
Result<at::Tensor> CheckpointTensorLike(const CheckpointFile& file, const std::string& path,
                                        const std::string& name, const at::Tensor& like);

// The optimizer's per-parameter state as checkpoint members (host copies; `names[i]` names
// `params[i]`), with the optimizer/<kind> marker.
Result<std::vector<data::NpzArray>> OptimizerStateArrays(const torch::optim::Optimizer& optimizer,
                                                         OptimizerKind kind,
                                                         const std::vector<std::string>& names,
                                                         const std::vector<at::Tensor>& params);

// The reverse: every state member is checked (the kind is this run's, one shape per parameter,
// finite values, steps >= 0) before `optimizer` changes; the state is placed beside the parameters.
Status RestoreOptimizerState(const CheckpointFile& file, const std::string& path,
                             OptimizerKind kind, const std::vector<std::string>& names,
                             const std::vector<at::Tensor>& params,
                             torch::optim::Optimizer* optimizer);

}  // namespace quantkit::train
