#include "analysis/model_loading.h"

#include "common/check.h"
#include "onnx/import.h"
#include "passes/fold_identity.h"

namespace quantkit::analysis {

Result<ir::Model> LoadModelForQuantization(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(path));
  QK_RETURN_IF_ERROR(passes::PrepareConstants(*model.graph).WithContext(path));
  return model;
}

}  // namespace quantkit::analysis
