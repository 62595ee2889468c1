#include "formats/qkstats.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit::formats {
namespace {

using nlohmann::json;
using quant::RangeStats;
using quant::StreamingHistogram;

constexpr size_t kSha256HexLength = 64;

json FloatToJson(float f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return static_cast<double>(f);
}

json SparseBins(const std::vector<int64_t>& bins) {
  json out = json::array();
  for (size_t k = 0; k < bins.size(); ++k) {
    if (bins[k] != 0) out.push_back({static_cast<int64_t>(k), bins[k]});
  }
  return out;
}

json TensorToJson(const quant::TensorCollector& t) {
  const RangeStats& r = t.range();
  json j;
  j["range"] = {{"count", r.count},          {"nan", r.nan_count},
                {"posinf", r.posinf_count},  {"neginf", r.neginf_count},
                {"zeros", r.zero_count},     {"min", FloatToJson(r.min)},
                {"max", FloatToJson(r.max)}, {"amax", FloatToJson(r.amax)}};
  const StreamingHistogram& h = t.histogram();
  j["histogram"] = {{"range_exp", h.empty_range() ? json(nullptr) : json(h.range_exp())},
                    {"positive", SparseBins(h.positive())},
                    {"negative", SparseBins(h.negative())},
                    {"zeros", h.zero_count()},
                    {"nonfinite", h.nonfinite_count()}};
  if (auto pc = t.per_channel()) {
    json amax = json::array();
    for (float a : pc->amax) amax.push_back(FloatToJson(a));
    j["per_channel"] = {{"axis", pc->axis}, {"amax", amax}, {"nonfinite", pc->nonfinite_count}};
  }
  return j;
}

// Strict readers: every helper names the JSON path of what is wrong.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const std::string& what) const {
    return Status(StatusCode::kInvalidModel, source_ + ": " + what);
  }

  Status OnlyKeys(const json& j, const std::string& path, std::set<std::string> required,
                  std::set<std::string> optional = {}) const {
    if (!j.is_object()) return Error(path + " is not an object");
    for (const auto& [key, value] : j.items()) {
      if (!required.count(key) && !optional.count(key)) {
        return Error("unknown key '" + key + "' in " + path);
      }
    }
    for (const std::string& key : required) {
      if (!j.contains(key)) return Error("missing key '" + key + "' in " + path);
    }
    return Status::Ok();
  }

  Result<int64_t> Count(const json& j, const std::string& path) const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0) {
      return Error(path + " is not a non-negative integer");
    }
    return j.get<int64_t>();
  }

  Result<float> Float(const json& j, const std::string& path) const {
    if (j.is_number()) {
      const double d = j.get<double>();
      const float f = static_cast<float>(d);
      if (static_cast<double>(f) != d) return Error(path + " is not a float32 value");
      return f;
    }
    if (j == "inf") return std::numeric_limits<float>::infinity();
    if (j == "-inf") return -std::numeric_limits<float>::infinity();
    if (j == "nan") return std::numeric_limits<float>::quiet_NaN();
    return Error(path + " is not a number");
  }

  Result<std::vector<int64_t>> Bins(const json& j, const std::string& path, int64_t n) const {
    if (!j.is_array()) return Error(path + " is not an array");
    std::vector<int64_t> bins(static_cast<size_t>(n), 0);
    int64_t previous = -1;
    for (const json& pair : j) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
          !pair[1].is_number_integer()) {
        return Error(path + " entries must be [bin, count] integer pairs");
      }
      const int64_t k = pair[0].get<int64_t>(), c = pair[1].get<int64_t>();
      if (k <= previous || k >= n)
        return Error(path + " bin indices must increase within [0, " + std::to_string(n) + ")");
      if (c <= 0) return Error(path + " counts must be positive");
      bins[static_cast<size_t>(k)] = c;
      previous = k;
    }
    return bins;
  }

  Result<quant::TensorCollector> Tensor(const json& j, const std::string& name,
                                        int log2_bins) const {
    const std::string p = "tensor '" + name + "'";
    QK_RETURN_IF_ERROR(OnlyKeys(j, p, {"range", "histogram"}, {"per_channel"}));
    const json& r = j["range"];
    QK_RETURN_IF_ERROR(OnlyKeys(
        r, p + ".range", {"count", "nan", "posinf", "neginf", "zeros", "min", "max", "amax"}));
    RangeStats rs;
    QK_ASSIGN_OR_RETURN(rs.count, Count(r["count"], p + ".range.count"));
    QK_ASSIGN_OR_RETURN(rs.nan_count, Count(r["nan"], p + ".range.nan"));
    QK_ASSIGN_OR_RETURN(rs.posinf_count, Count(r["posinf"], p + ".range.posinf"));
    QK_ASSIGN_OR_RETURN(rs.neginf_count, Count(r["neginf"], p + ".range.neginf"));
    QK_ASSIGN_OR_RETURN(rs.zero_count, Count(r["zeros"], p + ".range.zeros"));
    QK_ASSIGN_OR_RETURN(rs.min, Float(r["min"], p + ".range.min"));
    QK_ASSIGN_OR_RETURN(rs.max, Float(r["max"], p + ".range.max"));
    QK_ASSIGN_OR_RETURN(rs.amax, Float(r["amax"], p + ".range.amax"));
    if (rs.finite_count() < 0) return Error(p + ".range counts exceed the element count");
    if (!rs.Consistent()) {
      return Error(fmt::format(
          "{}.range is inconsistent: min {:g}, max {:g}, amax {:g} over {} finite values "
          "({} zeros)",
          p, rs.min, rs.max, rs.amax, rs.finite_count(), rs.zero_count));
    }
    const json& h = j["histogram"];
    QK_RETURN_IF_ERROR(
        OnlyKeys(h, p + ".histogram", {"range_exp", "positive", "negative", "zeros", "nonfinite"}));
    const bool has_range = !h["range_exp"].is_null();
    if (has_range && !h["range_exp"].is_number_integer())
      return Error(p + ".histogram.range_exp is not an integer");
    // Read wide, then range-checked: get<int> of 2^40 would wrap to 0 (another scale, silently).
    const int64_t range_exp = has_range ? h["range_exp"].get<int64_t>() : 0;
    if (has_range && (range_exp < quant::kMinRangeExp || range_exp > quant::kMaxRangeExp)) {
      return Error(fmt::format("{}.histogram.range_exp {} out of range [{}, {}]", p, range_exp,
                               quant::kMinRangeExp, quant::kMaxRangeExp));
    }
    const int64_t n = int64_t{1} << log2_bins;
    QK_ASSIGN_OR_RETURN(auto pos, Bins(h["positive"], p + ".histogram.positive", n));
    QK_ASSIGN_OR_RETURN(auto neg, Bins(h["negative"], p + ".histogram.negative", n));
    QK_ASSIGN_OR_RETURN(int64_t zeros, Count(h["zeros"], p + ".histogram.zeros"));
    QK_ASSIGN_OR_RETURN(int64_t nonfinite, Count(h["nonfinite"], p + ".histogram.nonfinite"));
    auto hist = StreamingHistogram::FromParts(log2_bins, has_range, static_cast<int>(range_exp),
                                              std::move(pos), std::move(neg), zeros, nonfinite);
    if (!hist.ok()) return Error(p + ": " + hist.status().message());
    if (hist->binned_count() + hist->nonfinite_count() != rs.count) {
      return Error(p + ": histogram holds " +
                   std::to_string(hist->binned_count() + hist->nonfinite_count()) +
                   " values but range.count is " + std::to_string(rs.count));
    }
    std::optional<quant::PerChannelStats> pc;
    if (j.contains("per_channel")) {
      const json& c = j["per_channel"];
      QK_RETURN_IF_ERROR(OnlyKeys(c, p + ".per_channel", {"axis", "amax", "nonfinite"}));
      quant::PerChannelStats s;
      QK_ASSIGN_OR_RETURN(s.axis, Count(c["axis"], p + ".per_channel.axis"));
      QK_ASSIGN_OR_RETURN(s.nonfinite_count, Count(c["nonfinite"], p + ".per_channel.nonfinite"));
      if (!c["amax"].is_array()) return Error(p + ".per_channel.amax is not an array");
      for (const json& a : c["amax"]) {
        QK_ASSIGN_OR_RETURN(float f, Float(a, p + ".per_channel.amax[]"));
        if (!(std::isfinite(f) && f >= 0.0f)) {
          return Error(
              fmt::format("{}.per_channel.amax holds {:g}: an amax is finite and >= 0", p, f));
        }
        s.amax.push_back(f);
      }
      pc = std::move(s);
    }
    return quant::TensorCollector::FromParts(rs, std::move(*hist), std::move(pc));
  }

 private:
  std::string source_;
};

bool IsLowerHex(const std::string& s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string SerializeStats(const StatsFile& stats) {
  json j;
  j["format"] = kQkStatsFormat;
  j["version"] = kQkStatsVersion;
  j["model_sha256"] = stats.model_sha256;
  j["histogram"] = {{"log2_bins", stats.histogram_log2_bins}, {"policy", kQkStatsHistogramPolicy}};
  j["tensors"] = json::object();
  for (const auto& [name, t] : stats.tensors) j["tensors"][name] = TensorToJson(t);
  return j.dump(1) + "\n";  // nlohmann objects are std::map: keys come out sorted
}

Result<StatsFile> ParseStats(const std::string& text, const std::string& source,
                             const std::string& expected_model_sha256) {
  Reader rd(source);
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return rd.Error("not valid JSON (truncated or corrupt .qkstats file)");
  if (!j.is_object() || !j.contains("format") || j["format"] != kQkStatsFormat) {
    return rd.Error("not a quantkit .qkstats file (missing \"format\": \"quantkit.qkstats\")");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != kQkStatsVersion) {
    return rd.Error("unsupported .qkstats version " +
                    (j.contains("version") ? j["version"].dump() : "(none)") +
                    " (this quantkit reads version " + std::to_string(kQkStatsVersion) + ")");
  }
  QK_RETURN_IF_ERROR(
      rd.OnlyKeys(j, "the file", {"format", "version", "model_sha256", "histogram", "tensors"}));
  StatsFile out;
  if (!j["model_sha256"].is_string() || !IsLowerHex(j["model_sha256"], kSha256HexLength)) {
    return rd.Error("model_sha256 is not 64 lowercase hex digits");
  }
  out.model_sha256 = j["model_sha256"].get<std::string>();
  if (!expected_model_sha256.empty() && out.model_sha256 != expected_model_sha256) {
    return rd.Error("statistics are for model " + out.model_sha256.substr(0, 12) +
                    "..., not for this model " + expected_model_sha256.substr(0, 12) + "...");
  }
  const json& h = j["histogram"];
  QK_RETURN_IF_ERROR(rd.OnlyKeys(h, "histogram", {"log2_bins", "policy"}));
  if (h["policy"] != kQkStatsHistogramPolicy)
    return rd.Error("unknown histogram policy " + h["policy"].dump());
  if (!h["log2_bins"].is_number_integer() ||
      h["log2_bins"].get<int64_t>() < quant::kMinStreamLog2Bins ||
      h["log2_bins"].get<int64_t>() > quant::kMaxStreamLog2Bins) {
    return rd.Error("histogram.log2_bins " + h["log2_bins"].dump() + " is out of range");
  }
  out.histogram_log2_bins = h["log2_bins"].get<int>();
  if (!j["tensors"].is_object()) return rd.Error("tensors is not an object");
  for (const auto& [name, t] : j["tensors"].items()) {
    QK_ASSIGN_OR_RETURN(quant::TensorCollector c, rd.Tensor(t, name, out.histogram_log2_bins));
    out.tensors.emplace(name, std::move(c));
  }
  return out;
}

Status WriteStatsFile(const std::string& path, const StatsFile& stats) {
  for (const auto& [name, t] : stats.tensors) {
    QK_RETURN_IF_NOT(t.has_histogram(), StatusCode::kInternal,
                     "{}: tensor '{}' has range-only statistics (max fast path); a .qkstats file "
                     "needs the histograms",
                     path, name);
  }
  const std::string text = SerializeStats(stats);
  return WriteFileAtomic(path, text);
}

Result<StatsFile> ReadStatsFile(const std::string& path, const std::string& expected_model_sha256) {
  QK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseStats(text, path, expected_model_sha256);
}

Status MergeStats(StatsFile* into, const StatsFile& other) {
  QK_RETURN_IF_NOT(into->model_sha256 == other.model_sha256, StatusCode::kInvalidArgument,
                   "statistics of different models cannot be merged ({}... vs {}...)",
                   into->model_sha256.substr(0, 12), other.model_sha256.substr(0, 12));
  QK_RETURN_IF_NOT(into->histogram_log2_bins == other.histogram_log2_bins,
                   StatusCode::kInvalidArgument,
                   "statistics with 2^{} and 2^{} histogram bins cannot be merged",
                   into->histogram_log2_bins, other.histogram_log2_bins);
  for (const auto& [name, t] : other.tensors) {
    auto it = into->tensors.find(name);
    if (it == into->tensors.end()) {
      into->tensors.emplace(name, t);
    } else {
      Status s = it->second.Merge(t);
      if (!s.ok()) return s.WithContext("tensor '" + name + "'");
    }
  }
  return Status::Ok();
}

Result<StatsFile> MergeStatsFiles(const std::vector<std::string>& paths,
                                  const std::string& expected_model_sha256) {
  QK_RETURN_IF_NOT(!paths.empty(), StatusCode::kInvalidArgument, "no .qkstats files to merge");
  QK_ASSIGN_OR_RETURN(StatsFile merged, ReadStatsFile(paths[0], expected_model_sha256));
  for (size_t i = 1; i < paths.size(); ++i) {
    QK_ASSIGN_OR_RETURN(StatsFile next, ReadStatsFile(paths[i], merged.model_sha256));
    Status s = MergeStats(&merged, next);
    if (!s.ok()) return s.WithContext(paths[i]);
  }
  return merged;
}

}  // namespace quantkit::formats
