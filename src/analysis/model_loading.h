// Loading a model for quantization work: import, then the passes PromoteConstants and
// FoldIdentityOfConstants (Constant nodes and Identity-of-constant become initializers) so weights,
// scales and zero points are all initializers. A model below opset 13 (what Q/DQ with a per-channel
// axis needs) is first upgraded with libonnx's version converter (onnx/opset_upgrade.h); `upgrade`
// says whether. Then an If whose condition is known without data (a constant, a static dimension)
// is replaced by its taken branch (passes/fold_constant_if.h). `reports` gets the three passes'
// reports. Every quantization workflow loads through here, so calibration, simulation and export
// see the same graph. Errors name the file.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "onnx/opset_upgrade.h"
#include "passes/pass.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

Result<ir::Model> LoadModelForQuantization(const std::string& path,
                                           onnx_io::OpsetUpgrade* upgrade = nullptr,
                                           std::vector<passes::PassReport>* reports = nullptr);

}  // namespace quantkit::analysis
