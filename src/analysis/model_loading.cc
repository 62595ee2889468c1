#include "analysis/model_loading.h"

#include "common/check.h"
#include "onnx/import.h"
#include "passes/fold_constant_if.h"
#include "passes/fold_identity.h"
#include "passes/insert_qdq.h"
#include "passes/promote_constants.h"

namespace quantkit::analysis {

Result<ir::Model> LoadModelForQuantization(const std::string& path, onnx_io::OpsetUpgrade* upgrade,
                                           std::vector<passes::PassReport>* reports) {
  onnx_io::OpsetUpgrade local;
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModelAtLeastOpset(
                                           path, passes::kMinQdqOpset, upgrade ? upgrade : &local));
  // FoldConstantIf after the constants are initializers: an If on a constant or a static
  // dimension becomes its taken branch, so the branch's ops are quantized like the rest.
  static const passes::PromoteConstants kPromote;
  static const passes::FoldIdentityOfConstants kFoldIdentity;
  static const passes::FoldConstantIf kFoldIf;
  QK_RETURN_IF_ERROR(
      passes::RunPasses(model, {&kPromote, &kFoldIdentity, &kFoldIf}, reports).WithContext(path));
  return model;
}

}  // namespace quantkit::analysis
