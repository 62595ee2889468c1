// `quantkit tensor-calib FILE.npy`: the amax each calibration method gives one tensor, plus its
// range and histogram summary (quant/tensor_calib.h on the pytorch-quantization reference
// histogram, so the numbers match it), as text and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/tensor_calib.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct TensorCalibRequest {
  std::string file;                            // a .npy tensor of any numeric dtype
  std::vector<std::string> methods = {"all"};  // method names (quant::ParseMethod) or "all"
  int64_t bins = 2048;                         // histogram bins
};

struct TensorCalibRun {
  quant::TensorCalibReport report;
  std::string dtype;  // of the file's tensor
  std::vector<int64_t> shape;
  std::string text, json;  // json: one object, newline-terminated
};

Result<TensorCalibRun> TensorCalib(const TensorCalibRequest& request);

}  // namespace quantkit::pipelines
