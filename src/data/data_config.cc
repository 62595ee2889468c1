// JSON data configs (--data FILE.json): one entry per model input, each an image folder with its
// declared preprocessing or any other --data spec for that input alone (docs/data-sources.md).
//
//   {"inputs": {"image": {"images": "val/", "resize": 256, "center_crop": 224,
//                         "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
//               "mask":  {"data": "mask.npy"}}}
//
// A single-input model may put the entry at the top level. Relative paths are relative to the
// config file. Unknown keys are errors, so a typo never silently drops a preprocessing step.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "data/source_internal.h"

namespace quantkit::data::internal {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// Samples of several per-input sources side by side; labels from the first source that has them.
class ZipSource final : public Source {
 public:
  ZipSource(std::vector<std::unique_ptr<Source>> parts, std::string description)
      : parts_(std::move(parts)), description_(std::move(description)) {}
  int64_t num_samples() const override { return parts_.front()->num_samples(); }
  std::vector<std::string> input_names() const override {
    std::vector<std::string> names;
    for (const auto& p : parts_) {
      for (std::string& n : p->input_names()) names.push_back(std::move(n));
    }
    return names;
  }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    Batch out;
    out.size = count;
    for (const auto& p : parts_) {
      QK_ASSIGN_OR_RETURN(Batch b, p->Read(start, count));
      for (auto& in : b.inputs) out.inputs.push_back(std::move(in));
      if (!out.labels && b.labels) out.labels = std::move(b.labels);
    }
    return out;
  }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override {
    Sha256 h;
    for (const auto& p : parts_) h.Update(p->Fingerprint());
    return h.HexDigest();
  }

 private:
  std::vector<std::unique_ptr<Source>> parts_;
  std::string description_;
};

std::string SizeText(const json& v, const std::string& where) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer()) {
    return std::to_string(v[0].get<int64_t>()) + "x" + std::to_string(v[1].get<int64_t>());
  }
  return "invalid size at " + where;
}

Result<std::vector<double>> Numbers(const json& v, const std::string& where) {
  std::vector<double> out;
  if (v.is_number()) return std::vector<double>{v.get<double>()};
  QK_RETURN_IF_NOT(v.is_array() && !v.empty(), StatusCode::kInvalidArgument,
                   "{}: expected a number or a list", where);
  for (const json& x : v) {
    QK_RETURN_IF_NOT(x.is_number(), StatusCode::kInvalidArgument, "{}: expected numbers", where);
    out.push_back(x.get<double>());
  }
  return out;
}

// "batch_axis": N (the axis of the model input the samples stack on) or null (fed as is, once
// per run) overrides the axis ModelInputs inferred from the model's shapes.
Status OverrideBatchAxis(const json& entry, const std::string& where, InputSpec* spec) {
  if (!entry.is_object() || !entry.contains("batch_axis")) return Status::Ok();
  const json& v = entry["batch_axis"];
  if (v.is_null()) {
    spec->batch_axis = kUnbatched;
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(spec->dims.size());
  QK_RETURN_IF_NOT(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                       (!spec->has_rank || v.get<int64_t>() < rank),
                   StatusCode::kInvalidArgument,
                   "{}.batch_axis: expected null or an axis in [0, {}) of input '{}', got {}",
                   where, spec->has_rank ? rank : 0, spec->name, v.dump());
  spec->batch_axis = v.get<int64_t>();
  return Status::Ok();
}

Result<std::unique_ptr<Source>> OpenEntry(const json& entry, const InputSpec& spec,
                                          const fs::path& base, const std::string& where) {
  auto resolve = [&](const std::string& p) {
    // Dataset specs such as fashion-mnist:test are not paths.
    if (p.rfind("fashion-mnist", 0) == 0 || fs::path(p).is_absolute()) return p;
    return (base / p).lexically_normal().string();
  };
  if (entry.is_string()) return OpenSampleSource(resolve(entry.get<std::string>()), {spec});
  QK_RETURN_IF_NOT(entry.is_object(), StatusCode::kInvalidArgument,
                   "{}: expected an object with \"images\" or \"data\", or a data spec string",
                   where);
  if (entry.contains("data")) {
    QK_RETURN_IF_NOT(
        entry.size() == 1 + entry.count("batch_axis") && entry["data"].is_string(),
        StatusCode::kInvalidArgument,
        "{}: \"data\" takes a spec string and no preprocessing keys (those apply to \"images\")",
        where);
    return OpenSampleSource(resolve(entry["data"].get<std::string>()), {spec});
  }
  QK_RETURN_IF_NOT(entry.contains("images") && entry["images"].is_string(),
                   StatusCode::kInvalidArgument, "{}: needs \"images\": DIR or \"data\": SPEC",
                   where);
  ImageOptions o;
  for (const auto& [key, value] : entry.items()) {
    const std::string at = where + "." + key;
    if (key == "images" || key == "batch_axis") continue;
    if (key == "resize") {
      QK_RETURN_IF_ERROR(SetResize(SizeText(value, at), &o).WithContext(at));
    } else if (key == "center_crop") {
      QK_RETURN_IF_ERROR(SetCrop(SizeText(value, at), &o).WithContext(at));
    } else if (key == "color" && value.is_string()) {
      QK_RETURN_IF_ERROR(SetColor(value.get<std::string>(), &o).WithContext(at));
    } else if (key == "layout" && value.is_string()) {
      QK_RETURN_IF_ERROR(SetLayout(value.get<std::string>(), &o).WithContext(at));
    } else if (key == "scale" && value.is_number()) {
      QK_RETURN_IF_ERROR(SetScale(value.get<double>(), &o).WithContext(at));
    } else if (key == "mean") {
      QK_ASSIGN_OR_RETURN(o.mean, Numbers(value, at));
    } else if (key == "std") {
      QK_ASSIGN_OR_RETURN(o.std, Numbers(value, at));
    } else {
      return MakeStatus(
          StatusCode::kInvalidArgument,
          "{}: unknown key or wrong type (keys: images, resize, center_crop, color, layout, "
          "scale, mean, std)",
          at);
    }
  }
  const std::string dir = resolve(entry["images"].get<std::string>());
  std::error_code ec;
  QK_RETURN_IF_NOT(fs::is_directory(dir, ec), StatusCode::kNotFound, "{}: '{}' is not a directory",
                   where, dir);
  // The config file and the input come first in any error of the folder or its preprocessing.
  Result<std::unique_ptr<Source>> folder = OpenImageFolder(dir, spec, o);
  if (!folder.ok()) return folder.status().WithContext(where);
  return folder;
}

// The data configs being opened on this thread, outermost first: an entry's "data" may name
// another config, which may name another... A config that names itself, directly or through
// others, would recurse until the stack overflows (a SIGSEGV); nesting is bounded too.
thread_local std::vector<std::string> open_configs;

// Keeps `path` on open_configs while its entries are opened.
class OpenConfigScope {
 public:
  explicit OpenConfigScope(std::string id) { open_configs.push_back(std::move(id)); }
  ~OpenConfigScope() { open_configs.pop_back(); }
  OpenConfigScope(const OpenConfigScope&) = delete;
  OpenConfigScope& operator=(const OpenConfigScope&) = delete;
};

std::string IncludeChain(const std::string& last) {
  std::string chain;
  for (const std::string& c : open_configs) chain += c + " -> ";
  return chain + last;
}

}  // namespace

Result<std::unique_ptr<Source>> OpenDataConfig(const std::string& path,
                                               const std::vector<InputSpec>& inputs) {
  // Identity by the resolved file (a link or another spelling of the same path is the same config).
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(path, ec);
  const std::string id = ec ? fs::path(path).lexically_normal().string() : resolved.string();
  QK_RETURN_IF_NOT(std::find(open_configs.begin(), open_configs.end(), id) == open_configs.end(),
                   StatusCode::kInvalidArgument, "{}: data config includes itself: {}", path,
                   IncludeChain(id));
  QK_RETURN_IF_NOT(open_configs.size() < kMaxDataConfigNesting, StatusCode::kInvalidArgument,
                   "{}: data configs nested more than {} deep (kMaxDataConfigNesting): {}", path,
                   kMaxDataConfigNesting, IncludeChain(id));
  const OpenConfigScope scope(id);
  QK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  QK_RETURN_IF_NOT(!config.is_discarded() && config.is_object(), StatusCode::kInvalidArgument,
                   "{}: not a JSON object (see docs/data-sources.md)", path);
  const fs::path base = fs::path(path).parent_path();
  json mapping;
  if (config.contains("inputs")) {
    QK_RETURN_IF_NOT(
        config.size() == 1 && config["inputs"].is_object(), StatusCode::kInvalidArgument,
        "{}: \"inputs\" must be an object {{input name: entry}} and the only top-level key", path);
    mapping = config["inputs"];
  } else {
    QK_RETURN_IF_NOT(inputs.size() == 1, StatusCode::kInvalidArgument,
                     "{}: the model has {} inputs; map each under \"inputs\": {{name: entry}}",
                     path, inputs.size());
    mapping[inputs.front().name] = config;
  }
  for (const auto& [name, entry] : mapping.items()) {
    bool known = false;
    for (const InputSpec& s : inputs) known |= s.name == name;
    QK_RETURN_IF_NOT(known, StatusCode::kInvalidArgument,
                     "{}: maps input '{}' but the model has no such input", path, name);
  }
  std::vector<std::unique_ptr<Source>> parts;
  std::string description = path + ":";
  std::vector<InputSpec> specs = inputs;
  for (InputSpec& spec : specs) {
    QK_RETURN_IF_NOT(mapping.contains(spec.name), StatusCode::kInvalidArgument,
                     "{}: no data for model input '{}' (add it under \"inputs\")", path, spec.name);
    QK_RETURN_IF_ERROR(
        OverrideBatchAxis(mapping[spec.name], path + ": inputs." + spec.name, &spec));
    QK_ASSIGN_OR_RETURN(auto part,
                        OpenEntry(mapping[spec.name], spec, base, path + ": inputs." + spec.name));
    if (!parts.empty()) {
      QK_RETURN_IF_NOT(part->num_samples() == parts.front()->num_samples(),
                       StatusCode::kInvalidArgument,
                       "{}: input '{}' has {} samples but input '{}' has {}", path, spec.name,
                       part->num_samples(), inputs.front().name, parts.front()->num_samples());
    }
    description += fmt::format(" {} <- {};", spec.name, part->Describe());
    parts.push_back(std::move(part));
  }
  description.pop_back();
  std::unique_ptr<Source> samples =
      parts.size() == 1 ? std::move(parts.front())
                        : std::unique_ptr<Source>(new ZipSource(std::move(parts), description));
  return WithModelLayout(std::move(samples), specs);
}

}  // namespace quantkit::data::internal
