#include "runtime/run_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/check.h"
#include "common/text.h"
#include "data/npy.h"
#include "onnx/import.h"
#include "runtime/interpreter.h"

namespace quantkit::runtime {

namespace {

std::string FileNameFor(const std::string& tensor) {
  std::string s;
  for (char c : tensor) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return s.empty() ? "_" : s;
}

TensorSummary Summarize(const std::string& name, const ir::Tensor& t) {
  TensorSummary s;
  s.name = name;
  s.dtype = t.dtype();
  s.shape = t.dims();
  auto values = data::ToFloat32(t);
  if (!values.ok()) return s;
  double sum = 0;
  int64_t n = 0;
  bool first = true;
  for (float v : *values) {
    if (!std::isfinite(v)) {
      ++s.non_finite;
      continue;
    }
    s.min = first ? v : std::min<double>(s.min, v);
    s.max = first ? v : std::max<double>(s.max, v);
    first = false;
    sum += v;
    ++n;
  }
  s.mean = n ? sum / n : 0;
  return s;
}

// Writes the observed tensors the user asked to dump.
class DumpObserver : public Observer {
 public:
  DumpObserver(const RunModelOptions& o) : options_(o) {}
  bool Wants(const std::string& name) const override {
    if (options_.dump_all) return true;
    return std::find(options_.dump.begin(), options_.dump.end(), name) != options_.dump.end();
  }
  Status OnTensor(const std::string& name, const ir::Node*, const TensorView& v) override {
    ir::Tensor t(v.dtype, v.shape);
    if (t.nbytes() > 0) std::memcpy(t.mutable_data(), v.data, t.nbytes());
    const std::string path = (std::filesystem::path(options_.output_dir) / (FileNameFor(name) + ".npy")).string();
    return data::WriteNpy(path, t);
  }

 private:
  const RunModelOptions& options_;
};

}  // namespace

std::string TensorSummary::ToString() const {
  std::string s = fmt::format("{}: {}[{}] min={:.6g} max={:.6g} mean={:.6g}", EscapeControl(name),
                              ir::DTypeName(dtype), fmt::join(shape, ","), min, max, mean);
  if (non_finite > 0) s += fmt::format(" non-finite={}", non_finite);
  if (!path.empty()) s += " -> " + EscapeControl(path);
  return s;
}

Result<std::vector<TensorSummary>> RunModelFiles(const RunModelOptions& options) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(options.model_path));
  // A --dump name that the run never produces would dump nothing and still succeed.
  std::vector<std::string> produced;
  for (const ir::Value* v : model.graph->inputs()) produced.push_back(v->name());
  for (const ir::Node* n : model.graph->nodes()) {
    for (const ir::Value* v : n->outputs()) {
      if (v) produced.push_back(v->name());
    }
  }
  for (const std::string& name : options.dump) {
    if (std::find(produced.begin(), produced.end(), name) != produced.end()) continue;
    return MakeStatus(StatusCode::kNotFound, "{}: --dump '{}' names no tensor of the model{}", options.model_path,
                      EscapeControl(name), DidYouMean(name, produced));
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<Interpreter> interp, Interpreter::Create(std::move(model)));
  std::vector<NamedTensor> inputs;
  for (const auto& [name, path] : options.inputs) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t, data::ReadNpy(path));
    inputs.push_back({name, std::move(t)});
  }
  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  if (ec) return MakeStatus(StatusCode::kIoError, "{}: cannot create directory: {}", options.output_dir, ec.message());
  DumpObserver dump(options);
  RunOptions run_options;
  if (options.dump_all || !options.dump.empty()) run_options.observers.push_back(&dump);
  QK_ASSIGN_OR_RETURN(std::vector<NamedTensor> outputs, interp->Run(inputs, run_options));
  std::vector<TensorSummary> summaries;
  for (const NamedTensor& o : outputs) {
    TensorSummary s = Summarize(o.name, o.tensor);
    s.path = (std::filesystem::path(options.output_dir) / (FileNameFor(o.name) + ".npy")).string();
    QK_RETURN_IF_ERROR(data::WriteNpy(s.path, o.tensor));
    summaries.push_back(std::move(s));
  }
  return summaries;
}

}  // namespace quantkit::runtime
