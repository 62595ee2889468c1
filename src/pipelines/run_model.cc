#include "pipelines/run_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/artifact_set.h"
#include "common/check.h"
#include "common/text.h"
#include "data/npy.h"
#include "onnx/import.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {

namespace {

std::string FileNameFor(const std::string& tensor) {
  std::string s;
  for (char c : tensor)
    s +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
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

// Tensor names become file names (FileNameFor); two different tensors must not land in one file
// ("a/b" and "a_b"): the second would silently replace the first.
class OutputFiles {
 public:
  explicit OutputFiles(ArtifactSet* out) : out_(out) {}
  Result<std::string> Stage(const std::string& tensor) {
    const std::string file = FileNameFor(tensor) + ".npy";
    const auto [it, inserted] = owner_.emplace(file, tensor);
    QK_RETURN_IF_NOT(inserted || it->second == tensor, StatusCode::kInvalidArgument,
                     "tensors '{}' and '{}' would both be written to {}", EscapeControl(it->second),
                     EscapeControl(tensor), file);
    return out_->StageNew(file);
  }

 private:
  ArtifactSet* out_;
  std::map<std::string, std::string> owner_;  // file -> tensor
};

// Writes the observed tensors the user asked to dump (staged: they appear with the outputs).
class DumpObserver : public runtime::Observer {
 public:
  DumpObserver(const RunModelOptions& o, OutputFiles* out) : options_(o), out_(out) {}
  bool Wants(const std::string& name) const override {
    if (options_.dump_all) return true;
    return std::find(options_.dump.begin(), options_.dump.end(), name) != options_.dump.end();
  }
  Status OnTensor(const std::string& name, const ir::Node*, const runtime::TensorView& v) override {
    ir::Tensor t(v.dtype, v.shape);
    if (t.nbytes() > 0) std::memcpy(t.mutable_data(), v.data, t.nbytes());
    QK_ASSIGN_OR_RETURN(const std::string path, out_->Stage(name));
    return data::WriteNpy(path, t);
  }

 private:
  const RunModelOptions& options_;
  OutputFiles* out_;
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
    return MakeStatus(StatusCode::kNotFound, "{}: --dump '{}' names no tensor of the model{}",
                      options.model_path, EscapeControl(name),
                      DidYouMean(name, produced, "tensors of the model"));
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp,
                      runtime::Interpreter::Create(std::move(model)));
  std::vector<runtime::NamedTensor> inputs;
  for (const auto& [name, path] : options.inputs) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t, data::ReadNpy(path));
    inputs.push_back({name, std::move(t)});
  }
  // Outputs and dumps are one unit: all of them or none (common/artifact_set.h).
  QK_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactSet> out, ArtifactSet::Open(options.output_dir, {}));
  OutputFiles files(out.get());
  DumpObserver dump(options, &files);
  runtime::RunOptions run_options;
  if (options.dump_all || !options.dump.empty()) run_options.observers.push_back(&dump);
  QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> outputs, interp->Run(inputs, run_options));
  std::vector<TensorSummary> summaries;
  for (const runtime::NamedTensor& o : outputs) {
    TensorSummary s = Summarize(o.name, o.tensor);
    QK_ASSIGN_OR_RETURN(const std::string staged, files.Stage(o.name));
    QK_RETURN_IF_ERROR(data::WriteNpy(staged, o.tensor));
    s.path = out->Target(FileNameFor(o.name) + ".npy");
    summaries.push_back(std::move(s));
  }
  QK_RETURN_IF_ERROR(out->Commit().status());
  return summaries;
}

}  // namespace quantkit::pipelines
