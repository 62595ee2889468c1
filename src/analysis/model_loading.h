// Loading a model for quantization work: import, then PrepareConstants (Constant nodes and
// Identity-of-constant become initializers) so weights, scales and zero points are all
// initializers. Errors name the file.
#pragma once

#include <string>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

Result<ir::Model> LoadModelForQuantization(const std::string& path);

}  // namespace quantkit::analysis
