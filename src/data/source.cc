#include "data/source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "common/artifact_set.h"
#include "common/check.h"
#include "common/dir_walk.h"
#include "common/sha256.h"
#include "common/text.h"
#include "data/npy.h"
#include "data/source_internal.h"
#include "ir/float16.h"

namespace quantkit::data {
namespace fs = std::filesystem;

namespace internal {

Result<ir::Tensor> Conform(ir::Tensor t, const InputSpec& spec, bool batched,
                           const std::string& origin, std::string* note) {
  // One rule for every command (run, calibrate, eval, diagnose, data), as docs/cli.md says: the
  // data's dtype is the model input's, or it is refused. float64 -> float32 looks harmless but
  // usually means un-preprocessed data (numpy's default dtype), and a silent cast hides that.
  // The one conversion: float32 data for a float16 / bfloat16 input (an FP16 model made with its
  // inputs converted) is rounded to it, nearest even, as the deployment's own conversion does;
  // the same preprocessed data then serves the FP32 model and its FP16 twin.
  if (t.dtype() == ir::DType::kFloat && ir::Is16BitFloat(spec.dtype)) {
    QK_ASSIGN_OR_RETURN(t, ir::ConvertFloatTensor(t, spec.dtype));
    if (note)
      *note = fmt::format("input '{}': float32 data rounded to {}", spec.name,
                          ir::DTypeName(spec.dtype));
  }
  QK_RETURN_IF_NOT(
      t.dtype() == spec.dtype, StatusCode::kInvalidArgument,
      "{}: input '{}' expects {} but the data is {} (convert it, e.g. "
      "x.astype(np.float32); quantkit does not guess preprocessing such as 0-255 -> 0-1)",
      origin, spec.name, ir::DTypeName(spec.dtype), ir::DTypeName(t.dtype()));
  // Per-sample dims: drop the leading sample dim of batched arrays.
  std::vector<int64_t> sample(t.dims().begin() + (batched ? 1 : 0), t.dims().end());
  if (spec.has_rank) {
    const std::vector<int64_t> want = spec.SampleDims();
    bool ok = sample.size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == sample[i];
    if (!ok) {
      auto fmt_dims = [](const std::vector<int64_t>& d) {
        std::string s = "[";
        for (size_t i = 0; i < d.size(); ++i)
          s += (i ? "," : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
        return s + "]";
      };
      return MakeStatus(StatusCode::kInvalidArgument,
                        "{}: input '{}' expects samples of shape {} (model input {}) but the data "
                        "has {} {}",
                        origin, spec.name, fmt_dims(want), fmt_dims(spec.dims),
                        batched ? "samples of shape" : "a sample of shape", fmt_dims(sample));
    }
  }
  return t;
}

ir::Tensor WithLeadingDim(ir::Tensor t) {
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), t.dims().begin(), t.dims().end());
  ir::Tensor one(t.dtype(), dims);
  std::memcpy(one.mutable_data(), t.data(), t.nbytes());
  return one;
}

Result<ir::Tensor> StackRows(const std::vector<const ir::Tensor*>& rows, const std::string& name) {
  QK_RETURN_IF_NOT(!rows.empty(), StatusCode::kInternal, "StackRows: no rows");
  const ir::Tensor& first = *rows.front();
  std::vector<int64_t> dims{static_cast<int64_t>(rows.size())};
  dims.insert(dims.end(), first.dims().begin(), first.dims().end());
  ir::Tensor out(first.dtype(), dims);
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  for (const ir::Tensor* r : rows) {
    // Callers batch through ReadStackable, which falls back to runs of equal shapes.
    QK_RETURN_IF_NOT(
        r->dims() == first.dims() && r->dtype() == first.dtype(), StatusCode::kInvalidArgument,
        "input '{}': samples differ in shape ({} vs {} elements)", name, r->numel(), first.numel());
    std::memcpy(dst, r->data(), r->nbytes());
    dst += r->nbytes();
  }
  return out;
}

}  // namespace internal

namespace {

using internal::Conform;

// Arrays, one per input, leading dim = samples: in memory, or views of memory-mapped .npy files
// whose pages are given back after each batch is copied out (so RSS stays at about one batch).
class ArraySource final : public Source {
 public:
  ArraySource(std::vector<std::pair<std::string, ir::Tensor>> arrays,
              std::vector<std::shared_ptr<const MappedFile>> mappings, std::string description,
              std::string fingerprint)
      : arrays_(std::move(arrays)),
        mappings_(std::move(mappings)),
        description_(std::move(description)),
        fingerprint_(std::move(fingerprint)) {}

  int64_t num_samples() const override {
    return arrays_.empty() ? 0 : arrays_.front().second.dims()[0];
  }
  std::vector<std::string> input_names() const override {
    std::vector<std::string> names;
    for (const auto& [n, t] : arrays_) names.push_back(n);
    return names;
  }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count > 0 && start + count <= num_samples(),
                     StatusCode::kInternal, "ArraySource: samples [{}, {}) out of range", start,
                     start + count);
    Batch b;
    b.size = count;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      const auto& [name, t] = arrays_[i];
      std::vector<int64_t> dims = t.dims();
      dims[0] = count;
      ir::Tensor slice(t.dtype(), dims);
      const size_t row = t.nbytes() / static_cast<size_t>(t.dims()[0]);
      const uint8_t* src = static_cast<const uint8_t*>(t.data()) + row * static_cast<size_t>(start);
      std::memcpy(slice.mutable_data(), src, row * static_cast<size_t>(count));
      if (const auto& m = mappings_[i])
        m->Release(static_cast<size_t>(src - m->data()), row * static_cast<size_t>(count));
      b.inputs.emplace_back(name, std::move(slice));
    }
    return b;
  }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override { return fingerprint_; }

 private:
  std::vector<std::pair<std::string, ir::Tensor>> arrays_;
  std::vector<std::shared_ptr<const MappedFile>> mappings_;  // per array; null when in memory
  std::string description_;
  std::string fingerprint_;
};

// One file per sample (DIR/*.npy for a single-input model).
class SampleFileSource final : public Source {
 public:
  SampleFileSource(std::vector<std::string> files, InputSpec spec, std::string description,
                   std::string fingerprint)
      : files_(std::move(files)),
        spec_(std::move(spec)),
        description_(std::move(description)),
        fingerprint_(std::move(fingerprint)) {}
  int64_t num_samples() const override { return static_cast<int64_t>(files_.size()); }
  std::vector<std::string> input_names() const override { return {spec_.name}; }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    std::vector<ir::Tensor> samples;
    for (int64_t i = start; i < start + count; ++i) {
      const std::string& f = files_[static_cast<size_t>(i)];
      QK_ASSIGN_OR_RETURN(ir::Tensor t, ReadNpy(f));
      QK_ASSIGN_OR_RETURN(t, Conform(std::move(t), spec_, /*batched=*/false, f, nullptr));
      samples.push_back(std::move(t));
    }
    std::vector<const ir::Tensor*> rows;
    for (const auto& s : samples) rows.push_back(&s);
    Batch b;
    b.size = count;
    QK_ASSIGN_OR_RETURN(ir::Tensor stacked, internal::StackRows(rows, spec_.name));
    b.inputs.emplace_back(spec_.name, std::move(stacked));
    return b;
  }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override { return fingerprint_; }

 private:
  std::vector<std::string> files_;
  InputSpec spec_;
  std::string description_;
  std::string fingerprint_;
};

class TakeSource final : public Source {
 public:
  TakeSource(std::unique_ptr<Source> inner, int64_t n) : inner_(std::move(inner)), n_(n) {}
  int64_t num_samples() const override { return n_; }
  std::vector<std::string> input_names() const override { return inner_->input_names(); }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start + count <= n_, StatusCode::kInternal, "TakeSource: out of range");
    return inner_->Read(start, count);
  }
  std::string Describe() const override {
    return fmt::format("first {} of {}", n_, inner_->Describe());
  }
  std::string Fingerprint() const override {
    return inner_->Fingerprint() + ":" + std::to_string(n_);
  }
  int64_t max_batch() const override { return inner_->max_batch(); }

 private:
  std::unique_ptr<Source> inner_;
  int64_t n_;
};

const InputSpec* FindSpec(const std::vector<InputSpec>& inputs, const std::string& name) {
  for (const InputSpec& s : inputs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

// Validates per-input arrays (batched) and builds an ArraySource.
Result<std::unique_ptr<Source>> internal::MakeArraySource(
    std::vector<std::pair<std::string, ir::Tensor>> arrays, const std::vector<InputSpec>& inputs,
    const std::string& origin, const Mappings& mappings) {
  std::vector<std::pair<std::string, ir::Tensor>> conformed;
  std::vector<std::shared_ptr<const MappedFile>> conformed_mappings;
  Sha256 hash;
  std::vector<std::string> notes;
  int64_t n = -1;
  for (const InputSpec& spec : inputs) {
    auto it = std::find_if(arrays.begin(), arrays.end(),
                           [&](const auto& a) { return a.first == spec.name; });
    if (it == arrays.end() && arrays.size() == 1 && inputs.size() == 1) it = arrays.begin();
    QK_RETURN_IF_NOT(it != arrays.end(), StatusCode::kInvalidArgument,
                     "{}: no data for model input '{}' (give NAME=FILE.npy for each input)", origin,
                     spec.name);
    auto found = mappings.find(it->first);
    std::shared_ptr<const MappedFile> mapping = found == mappings.end() ? nullptr : found->second;
    ir::Tensor t = std::move(it->second);
    // An array one rank above the model's per-sample rank is a batch of samples (leading dim);
    // at the per-sample rank it is a single sample.
    const int64_t sample_rank = static_cast<int64_t>(spec.SampleDims().size());
    QK_RETURN_IF_NOT(t.rank() >= 1 || (spec.has_rank && sample_rank == 0),
                     StatusCode::kInvalidArgument, "{}: array for input '{}' is a scalar", origin,
                     spec.name);
    const bool batched = !spec.has_rank || t.rank() == sample_rank + 1;
    if (!batched) t = internal::WithLeadingDim(std::move(t));
    std::string note;
    QK_ASSIGN_OR_RETURN(t, Conform(std::move(t), spec, /*batched=*/true, origin, &note));
    if (!note.empty()) notes.push_back(note);
    QK_RETURN_IF_NOT(n < 0 || t.dims()[0] == n, StatusCode::kInvalidArgument,
                     "{}: input '{}' has {} samples but another input has {}", origin, spec.name,
                     t.dims()[0], n);
    n = t.dims()[0];
    // A conversion or reshape copied the data out of the mapping: nothing to give back then.
    const auto* bytes = static_cast<const uint8_t*>(t.data());
    if (mapping &&
        !(bytes >= mapping->data() && bytes + t.nbytes() <= mapping->data() + mapping->size())) {
      mapping.reset();
    }
    hash.Update(spec.name);
    // Hash in chunks, releasing each from a mapped file once hashed: opening stays flat in memory.
    constexpr size_t kChunk = size_t{64} << 20;
    for (size_t off = 0; off < t.nbytes(); off += kChunk) {
      const size_t len = std::min(kChunk, t.nbytes() - off);
      hash.Update(bytes + off, len);
      if (mapping) mapping->Release(static_cast<size_t>(bytes + off - mapping->data()), len);
    }
    conformed.emplace_back(spec.name, std::move(t));
    conformed_mappings.push_back(std::move(mapping));
  }
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: the data holds no samples", origin);
  std::string description = fmt::format("{} ({} samples)", origin, n);
  for (const std::string& note : notes) description += "; " + note;
  return std::unique_ptr<Source>(new ArraySource(
      std::move(conformed), std::move(conformed_mappings), description, hash.HexDigest()));
}

namespace {
using internal::MakeArraySource;

bool HasSuffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<std::unique_ptr<Source>> OpenDirectory(const std::string& dir,
                                              const std::vector<InputSpec>& inputs) {
  std::vector<std::string> npy;
  bool has_test_sets = false;
  std::error_code ec;
  QK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirectory(dir));
  for (const DirEntry& e : entries) {
    if (e.is_file && HasSuffix(e.name, ".npy")) npy.push_back(e.path);
    if (e.is_directory && e.name.rfind("test_data_set_", 0) == 0) has_test_sets = true;
  }
  std::sort(npy.begin(), npy.end());
  if (has_test_sets) return internal::OpenTensorProtoDir(dir, inputs);
  QK_RETURN_IF_NOT(!npy.empty(), StatusCode::kInvalidArgument,
                   "{}: empty data directory (no .npy files and no test_data_set_* folders)", dir);
  // DIR/<input>.npy for every input: arrays with a leading sample dimension.
  bool per_input = true;
  for (const InputSpec& s : inputs) per_input &= fs::exists(fs::path(dir) / (s.name + ".npy"), ec);
  if (per_input) {
    std::vector<std::pair<std::string, ir::Tensor>> arrays;
    internal::Mappings mappings;
    for (const InputSpec& s : inputs) {
      QK_ASSIGN_OR_RETURN(ir::Tensor t,
                          MapNpy((fs::path(dir) / (s.name + ".npy")).string(), &mappings[s.name]));
      arrays.emplace_back(s.name, std::move(t));
    }
    return MakeArraySource(std::move(arrays), inputs, dir, mappings);
  }
  QK_RETURN_IF_NOT(inputs.size() == 1, StatusCode::kInvalidArgument,
                   "{}: a model with {} inputs needs DIR/<input>.npy for each input", dir,
                   inputs.size());
  Sha256 hash;
  for (const std::string& f : npy) {
    hash.Update(fs::path(f).filename().string());
    hash.Update(std::to_string(fs::file_size(f, ec)));
  }
  // Check the first sample now so a mismatch fails before any compute.
  QK_ASSIGN_OR_RETURN(ir::Tensor first, ReadNpy(npy.front()));
  QK_RETURN_IF_ERROR(
      Conform(std::move(first), inputs.front(), false, npy.front(), nullptr).status());
  const std::string description =
      fmt::format("{} ({} samples, one .npy per sample)", dir, npy.size());
  return std::unique_ptr<Source>(
      new SampleFileSource(std::move(npy), inputs.front(), description, hash.HexDigest()));
}

}  // namespace

Result<std::unique_ptr<Source>> OpenSource(const std::string& spec,
                                           const std::vector<InputSpec>& inputs,
                                           const ImageOptions& image) {
  std::error_code ec;
  // A data config may override batch axes: it presents its inputs in the model layout itself.
  if (!image.declared() && HasSuffix(spec, ".json") && !fs::is_directory(spec, ec)) {
    return internal::OpenDataConfig(spec, inputs);
  }
  QK_ASSIGN_OR_RETURN(std::unique_ptr<Source> samples,
                      internal::OpenSampleSource(spec, inputs, image));
  return internal::WithModelLayout(std::move(samples), inputs);
}

Result<std::unique_ptr<Source>> internal::OpenSampleSource(const std::string& spec,
                                                           const std::vector<InputSpec>& inputs,
                                                           const ImageOptions& image) {
  QK_RETURN_IF_NOT(!spec.empty(), StatusCode::kInvalidArgument, "no data given (--data)");
  QK_RETURN_IF_NOT(!inputs.empty(), StatusCode::kInvalidArgument,
                   "the model has no inputs to feed");
  std::error_code ec;
  const bool dir = fs::is_directory(spec, ec);
  bool images = dir && image.declared();
  if (dir && !images) {
    QK_ASSIGN_OR_RETURN(images, internal::IsImageFolder(spec));
  }
  QK_RETURN_IF_NOT(images || !image.declared(), StatusCode::kInvalidArgument,
                   "{}: image preprocessing options ({}) apply to image folders only{}", spec,
                   image.Describe(),
                   HasSuffix(spec, ".json") ? "; declare them in the JSON config" : "");
  if (images) {
    QK_RETURN_IF_NOT(
        inputs.size() == 1, StatusCode::kInvalidArgument,
        "{}: the model has {} inputs; map each to its data in a JSON config (--data FILE.json)",
        spec, inputs.size());
    return internal::OpenImageFolder(spec, inputs.front(), image);
  }
  if (!dir && HasSuffix(spec, ".json")) return internal::OpenDataConfig(spec, inputs);
  if (spec.rfind("fashion-mnist", 0) == 0) return internal::OpenFashionMnist(spec, inputs);
  if (spec.find('=') != std::string::npos) {
    std::vector<std::pair<std::string, ir::Tensor>> arrays;
    internal::Mappings mappings;
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t end = spec.find(',', pos);
      if (end == std::string::npos) end = spec.size();
      const std::string item = spec.substr(pos, end - pos);
      const size_t eq = item.find('=');
      QK_RETURN_IF_NOT(eq != std::string::npos && eq > 0, StatusCode::kInvalidArgument,
                       "data item '{}' is not NAME=FILE.npy", item);
      const std::string name = item.substr(0, eq);
      QK_RETURN_IF_NOT(FindSpec(inputs, name), StatusCode::kInvalidArgument,
                       "data names input '{}' but the model has no such input", name);
      QK_ASSIGN_OR_RETURN(ir::Tensor t, MapNpy(item.substr(eq + 1), &mappings[name]));
      arrays.emplace_back(name, std::move(t));
      pos = end + 1;
    }
    return MakeArraySource(std::move(arrays), inputs, spec, mappings);
  }
  if (dir) return OpenDirectory(spec, inputs);
  QK_RETURN_IF_NOT(fs::exists(spec, ec), StatusCode::kNotFound, "{}: no such file or directory",
                   spec);
  if (HasSuffix(spec, ".npz")) {
    return internal::OpenNpz(spec, inputs);
  }
  QK_RETURN_IF_NOT(
      HasSuffix(spec, ".npy"), StatusCode::kInvalidArgument,
      "{}: unknown data file kind (.npy, .npz, .json data config, a directory, or fashion-mnist:SPLIT)",
      spec);
  QK_RETURN_IF_NOT(inputs.size() == 1, StatusCode::kInvalidArgument,
                   "{}: the model has {} inputs; give NAME=FILE.npy for each", spec, inputs.size());
  internal::Mappings mappings;
  QK_ASSIGN_OR_RETURN(ir::Tensor t, MapNpy(spec, &mappings[inputs.front().name]));
  std::vector<std::pair<std::string, ir::Tensor>> arrays;
  arrays.emplace_back(inputs.front().name, std::move(t));
  return MakeArraySource(std::move(arrays), inputs, spec, mappings);
}

Status DumpSamples(const Source& source, const std::string& dir) {
  const int64_t n = source.num_samples();
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: no samples", source.Describe());
  // Locked before the samples are decoded; the .npy files land together or not at all, never
  // mixed with another run's (common/artifact_set.h).
  QK_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactSet> out, ArtifactSet::Open(dir, {}));
  QK_ASSIGN_OR_RETURN(Batch batch, source.Read(0, n));
  std::set<std::string> files;
  auto write = [&](const std::string& tensor, const std::string& file,
                   const ir::Tensor& t) -> Status {
    QK_RETURN_IF_NOT(
        files.insert(file).second, StatusCode::kInvalidArgument,
        "{}: input '{}' would be written to {} as well; rename one of the model inputs", dir,
        EscapeControl(tensor), file);
    QK_ASSIGN_OR_RETURN(const std::string path, out->StageNew(file));
    return WriteNpy(path, t);
  };
  for (const auto& [name, t] : batch.inputs) {
    // Input names may contain '/' or ':' (exporters' names); keep the file name flat.
    std::string file = name;
    for (char& c : file) {
      if (c == '/' || c == '\\' || c == ':') c = '_';
    }
    QK_RETURN_IF_ERROR(write(name, file + ".npy", t));
  }
  if (batch.labels) QK_RETURN_IF_ERROR(write("labels", "labels.npy", *batch.labels));
  return out->Commit().status();
}

std::unique_ptr<Source> Take(std::unique_ptr<Source> source, int64_t n) {
  if (n <= 0 || n >= source->num_samples()) return source;
  return internal::TakeBelowLayout(
      std::move(source), n, [](std::unique_ptr<Source> inner, int64_t m) {
        return std::unique_ptr<Source>(std::make_unique<TakeSource>(std::move(inner), m));
      });
}

Result<Batch> ConformBatch(std::vector<std::pair<std::string, ir::Tensor>> arrays,
                           const std::vector<InputSpec>& inputs, const std::string& origin) {
  std::string names;
  for (const InputSpec& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
  for (const auto& array : arrays) {
    // Not a structured binding: C++17 lambdas cannot capture one (clang, the fuzz build, refuses).
    const std::string& name = array.first;
    const bool known = std::any_of(inputs.begin(), inputs.end(),
                                   [&](const InputSpec& in) { return in.name == name; });
    QK_RETURN_IF_NOT(known, StatusCode::kInvalidArgument,
                     "{}: '{}' is not an input of the model (inputs: {})", origin, name, names);
  }
  Batch batch;
  for (const InputSpec& in : inputs) {
    auto it = std::find_if(arrays.begin(), arrays.end(),
                           [&](const auto& a) { return a.first == in.name; });
    QK_RETURN_IF_NOT(it != arrays.end(), StatusCode::kInvalidArgument,
                     "{}: no array for model input '{}' (the batch has {} of: {})", origin, in.name,
                     arrays.size(), names);
    if (!in.batched()) {  // the same value for every sample (a scalar option, a state)
      QK_ASSIGN_OR_RETURN(ir::Tensor t,
                          internal::Conform(std::move(it->second), in, false, origin, nullptr));
      batch.inputs.emplace_back(in.name, std::move(t));
      continue;
    }
    QK_RETURN_IF_NOT(in.batch_axis == 0, StatusCode::kUnsupported,
                     "{}: input '{}' stacks samples on axis {}; batches from Python must be "
                     "batch-first (use a data spec or config with batch_axis)",
                     origin, in.name, in.batch_axis);
    QK_RETURN_IF_NOT(it->second.rank() >= 1, StatusCode::kInvalidArgument,
                     "{}: input '{}' is a scalar; a batch needs a leading batch dimension", origin,
                     in.name);
    const int64_t n = it->second.dims()[0];
    QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: input '{}' holds no samples", origin,
                     in.name);
    QK_RETURN_IF_NOT(batch.size == 0 || batch.size == n, StatusCode::kInvalidArgument,
                     "{}: input '{}' has {} samples but the others have {}", origin, in.name, n,
                     batch.size);
    batch.size = n;
    QK_ASSIGN_OR_RETURN(ir::Tensor t, internal::Conform(std::move(it->second), in, /*batched=*/true,
                                                        origin, nullptr));
    batch.inputs.emplace_back(in.name, std::move(t));
  }
  return batch;
}

}  // namespace quantkit::data
