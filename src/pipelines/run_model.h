// Runs a model file on .npy inputs and writes .npy outputs (the library side of `quantkit run`).
// ATen-free header.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct RunModelOptions {
  std::string model_path;
  std::vector<std::pair<std::string, std::string>> inputs;  // graph input name -> .npy path
  std::string output_dir = ".";
  std::vector<std::string> dump;  // intermediate tensors to write as well
  bool dump_all = false;          // every produced tensor
};

struct TensorSummary {
  std::string name;
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  double min = 0, max = 0, mean = 0;  // over finite values, as double
  int64_t non_finite = 0;
  std::string path;  // the .npy written

  // "y: float[1,1000] min=-3.2 max=9.1 mean=0.01 -> out/y.npy"
  std::string ToString() const;
};

// Imports the model, feeds the inputs, runs, and writes every graph output (and the dumped
// tensors) as <output_dir>/<name>.npy (names sanitized to [A-Za-z0-9._-]). Returns one summary
// per graph output.
Result<std::vector<TensorSummary>> RunModelFiles(const RunModelOptions& options);

}  // namespace quantkit::pipelines
