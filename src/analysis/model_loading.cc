#include "analysis/model_loading.h"

#include "common/check.h"
#include "onnx/import.h"
#include "passes/fold_constant_if.h"
#include "passes/fold_identity.h"
#include "passes/insert_qdq.h"

namespace quantkit::analysis {

Result<ir::Model> LoadModelForQuantization(const std::string& path, onnx_io::OpsetUpgrade* upgrade,
                                           int* folded_ifs) {
  onnx_io::OpsetUpgrade local;
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModelAtLeastOpset(
                                           path, passes::kMinQdqOpset, upgrade ? upgrade : &local));
  QK_RETURN_IF_ERROR(passes::PrepareConstants(*model.graph).WithContext(path));
  // After the constants are initializers: an If on a constant or a static dimension becomes its
  // taken branch, so the branch's ops are quantized like the rest of the graph.
  QK_RETURN_IF_ERROR(passes::FoldConstantIf(*model.graph, folded_ifs).WithContext(path));
  return model;
}

}  // namespace quantkit::analysis
