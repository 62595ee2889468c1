// `quantkit data`: exactly what calibrate and eval feed a model — the decoded, preprocessed
// samples of a data spec written as DIR/<input>.npy (and DIR/labels.npy), e.g. to compare with a
// torchvision pipeline.
#pragma once

#include <cstdint>
#include <string>

#include "data/image_options.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct DataDumpRequest {
  std::string model;  // ONNX model whose inputs the data feeds
  std::string data;   // data::OpenSource spec
  data::ImageOptions image;
  int64_t samples = 16;  // the first N (0: all; all are held in memory)
  std::string output_dir;
};

// Returns "<data description> -> <output_dir>".
Result<std::string> DumpData(const DataDumpRequest& request);

}  // namespace quantkit::pipelines
