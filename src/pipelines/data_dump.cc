#include "pipelines/data_dump.h"

#include <memory>

#include "common/check.h"
#include "data/source.h"
#include "onnx/import.h"

namespace quantkit::pipelines {

Result<std::string> DumpData(const DataDumpRequest& r) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(r.model));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(r.data, data::ModelInputs(model), r.image));
  source = data::Take(std::move(source), r.samples);
  QK_RETURN_IF_ERROR(data::DumpSamples(*source, r.output_dir));
  return source->Describe() + " -> " + r.output_dir;
}

}  // namespace quantkit::pipelines
