// DIR/test_data_set_N/input_K.pb: the ONNX backend-test layout. input_K feeds the K-th model
// input (not counting initializers); every set contributes its samples, in set order (N numeric).
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/check.h"
#include "common/dir_walk.h"
#include "data/source_internal.h"
#include "onnx/tensor_file.h"

namespace quantkit::data::internal {

Result<std::unique_ptr<Source>> OpenTensorProtoDir(const std::string& dir,
                                                   const std::vector<InputSpec>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, fs::path>> sets;
  QK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirectory(dir));
  for (const DirEntry& entry : entries) {
    const std::string& name = entry.name;
    const std::string prefix = "test_data_set_";
    if (!entry.is_directory || name.rfind(prefix, 0) != 0) continue;
    const std::string num = name.substr(prefix.size());
    // At most 18 digits: std::stoll cannot throw on them.
    if (num.empty() || num.size() > 18 || num.find_first_not_of("0123456789") != std::string::npos)
      continue;
    sets.emplace_back(std::stoll(num), fs::path(entry.path));
  }
  std::sort(sets.begin(), sets.end());
  QK_RETURN_IF_NOT(!sets.empty(), StatusCode::kInvalidArgument, "{}: no test_data_set_N folders",
                   dir);
  // Concatenate every set's input_K along the sample dimension.
  std::vector<std::vector<ir::Tensor>> per_input(inputs.size());
  for (const auto& [n, path] : sets) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const std::string file = (path / ("input_" + std::to_string(k) + ".pb")).string();
      QK_ASSIGN_OR_RETURN(ir::Tensor t, onnx_io::ReadTensorProtoFile(file));
      // A recorded call: the tensor as the model took it (its batch on the input's batch axis;
      // an unbatched input as is), or a single sample one rank lower.
      const InputSpec& spec = inputs[k];
      const bool model_layout =
          !spec.has_rank || !spec.batched() || t.rank() == static_cast<int64_t>(spec.dims.size());
      if (model_layout) {
        QK_ASSIGN_OR_RETURN(t, ModelLayoutToSamples(std::move(t), spec, file));
      } else {
        t = WithLeadingDim(std::move(t));
      }
      QK_ASSIGN_OR_RETURN(t, Conform(std::move(t), spec, /*batched=*/true, file, nullptr));
      per_input[k].push_back(std::move(t));
    }
  }
  std::vector<std::pair<std::string, ir::Tensor>> arrays;
  for (size_t k = 0; k < inputs.size(); ++k) {
    int64_t total = 0;
    for (const ir::Tensor& t : per_input[k]) total += t.dims()[0];
    std::vector<int64_t> dims = per_input[k].front().dims();
    dims[0] = total;
    ir::Tensor all(per_input[k].front().dtype(), dims);
    auto* dst = static_cast<uint8_t*>(all.mutable_data());
    for (const ir::Tensor& t : per_input[k]) {
      QK_RETURN_IF_NOT(t.dims().size() == dims.size() &&
                           std::equal(t.dims().begin() + 1, t.dims().end(), dims.begin() + 1),
                       StatusCode::kInvalidArgument,
                       "{}: input_{} has different sample shapes across test_data_set folders", dir,
                       k);
      std::memcpy(dst, t.data(), t.nbytes());
      dst += t.nbytes();
    }
    arrays.emplace_back(inputs[k].name, std::move(all));
  }
  return MakeArraySource(std::move(arrays), inputs, dir);
}

}  // namespace quantkit::data::internal
