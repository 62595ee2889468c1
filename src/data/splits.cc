#include "data/splits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit::data {
namespace {

constexpr int kSplitsJsonVersion = 1;

// Every key make_splits.py writes; anything else means a file quantkit does not understand.
const std::set<std::string>& KnownSplitsKeys() {
  static const std::set<std::string> keys = {
      "calib",  "calib_per_class", "dataset", "rule",          "seed",
      "source", "source_count",    "val",     "val_per_class", "version"};
  return keys;
}

// Everything in [0, count) that is in neither sorted list.
std::vector<int64_t> Complement(int64_t count, const std::vector<int64_t>& a,
                                const std::vector<int64_t>& b) {
  std::vector<int64_t> held;
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(held));
  std::vector<int64_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> rest;
  std::set_difference(all.begin(), all.end(), held.begin(), held.end(), std::back_inserter(rest));
  return rest;
}

Result<std::vector<int64_t>> ReadIndexList(const nlohmann::json& doc, const std::string& key,
                                           int64_t count, const std::string& path) {
  QK_RETURN_IF_NOT(doc.contains(key) && doc[key].is_array(), StatusCode::kInvalidModel,
                   "{}: missing array '{}'", path, key);
  std::vector<int64_t> out;
  out.reserve(doc[key].size());
  for (const auto& v : doc[key]) {
    QK_RETURN_IF_NOT(v.is_number_integer(), StatusCode::kInvalidModel,
                     "{}: '{}' holds a non-integer", path, key);
    const int64_t index = v.get<int64_t>();
    QK_RETURN_IF_NOT(index >= 0 && index < count, StatusCode::kInvalidModel,
                     "{}: '{}' index {} out of range [0, {})", path, key, index, count);
    QK_RETURN_IF_NOT(out.empty() || index > out.back(), StatusCode::kInvalidModel,
                     "{}: '{}' is not strictly ascending at index {} (after {})", path, key, index,
                     out.empty() ? -1 : out.back());
    out.push_back(index);
  }
  return out;
}

}  // namespace

uint64_t SplitMix64Next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

SplitSpec FashionMnistSplitSpec() {
  SplitSpec spec;
  spec.seed = 20240604;
  spec.calib_per_class = {205, 205, 205, 205, 205, 205, 205, 205, 204, 204};
  spec.val_per_class.assign(10, 500);
  return spec;
}

Result<Splits> ComputeSplits(const std::vector<int64_t>& labels, const SplitSpec& spec) {
  const int64_t num_classes = static_cast<int64_t>(spec.calib_per_class.size());
  QK_RETURN_IF_NOT(spec.val_per_class.size() == spec.calib_per_class.size(),
                   StatusCode::kInvalidArgument,
                   "split spec: {} calibration counts but {} validation counts",
                   spec.calib_per_class.size(), spec.val_per_class.size());
  std::vector<std::vector<std::pair<uint64_t, int64_t>>> ranked(
      num_classes);  // (key, index) per class
  uint64_t state = spec.seed;
  for (int64_t i = 0; i < static_cast<int64_t>(labels.size()); ++i) {
    const uint64_t key = SplitMix64Next(&state);  // drawn for every index, whatever its class
    QK_RETURN_IF_NOT(labels[i] >= 0 && labels[i] < num_classes, StatusCode::kInvalidArgument,
                     "split: label {} of image {} outside [0, {})", labels[i], i, num_classes);
    ranked[labels[i]].emplace_back(key, i);
  }
  Splits splits;
  splits.source_count = static_cast<int64_t>(labels.size());
  for (int64_t c = 0; c < num_classes; ++c) {
    auto& r = ranked[c];
    const int64_t n_calib = spec.calib_per_class[c], n_val = spec.val_per_class[c];
    QK_RETURN_IF_NOT(
        n_calib >= 0 && n_val >= 0 && n_calib + n_val <= static_cast<int64_t>(r.size()),
        StatusCode::kInvalidArgument, "split: class {} has {} images, the spec asks for {} + {}", c,
        r.size(), n_calib, n_val);
    std::sort(r.begin(), r.end());  // by key, then index
    for (int64_t k = 0; k < n_calib; ++k) splits.calib.push_back(r[k].second);
    for (int64_t k = n_calib; k < n_calib + n_val; ++k) splits.val.push_back(r[k].second);
  }
  std::sort(splits.calib.begin(), splits.calib.end());
  std::sort(splits.val.begin(), splits.val.end());
  splits.train = Complement(splits.source_count, splits.calib, splits.val);
  return splits;
}

Result<Splits> ReadSplitsJson(const std::string& path) {
  QK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  const nlohmann::json doc =
      nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  QK_RETURN_IF_NOT(!doc.is_discarded() && doc.is_object(), StatusCode::kInvalidModel,
                   "{}: not a JSON object", path);
  for (const auto& item : doc.items()) {
    QK_RETURN_IF_NOT(KnownSplitsKeys().count(item.key()) == 1, StatusCode::kInvalidModel,
                     "{}: unknown key '{}'", path, item.key());
  }
  QK_RETURN_IF_NOT(doc.contains("version") && doc["version"].is_number_integer() &&
                       doc["version"].get<int64_t>() == kSplitsJsonVersion,
                   StatusCode::kUnsupported, "{}: version {} is not supported (expected {})", path,
                   doc.contains("version") ? doc["version"].dump() : "missing", kSplitsJsonVersion);
  QK_RETURN_IF_NOT(doc.contains("source_count") && doc["source_count"].is_number_integer() &&
                       doc["source_count"].get<int64_t>() > 0,
                   StatusCode::kInvalidModel,
                   "{}: 'source_count' missing or not a positive integer", path);
  Splits splits;
  splits.source_count = doc["source_count"].get<int64_t>();
  QK_ASSIGN_OR_RETURN(splits.calib, ReadIndexList(doc, "calib", splits.source_count, path));
  QK_ASSIGN_OR_RETURN(splits.val, ReadIndexList(doc, "val", splits.source_count, path));
  std::vector<int64_t> both;
  std::set_intersection(splits.calib.begin(), splits.calib.end(), splits.val.begin(),
                        splits.val.end(), std::back_inserter(both));
  QK_RETURN_IF_NOT(both.empty(), StatusCode::kInvalidModel,
                   "{}: index {} is in both 'calib' and 'val'", path,
                   both.empty() ? -1 : both.front());
  splits.train = Complement(splits.source_count, splits.calib, splits.val);
  return splits;
}

}  // namespace quantkit::data
