#include "formats/trt_cache.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "common/check.h"
#include "common/file_util.h"
#include "common/text.h"
#include "formats/scale_problem.h"
#include "quant/params.h"

namespace quantkit::formats {
namespace {

// TensorRT 10 switched NV_TENSORRT_VERSION to a six-digit encoding (calibration-spec §1.2).
constexpr int kFirstSixDigitMajor = 10;

std::string TrimRight(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

}  // namespace

const char* ScaleProblem(float scale) {
  if (std::isnan(scale)) return "NaN";
  if (std::isinf(scale)) return "infinite";
  if (scale < 0.0f) return "negative";
  if (scale == 0.0f) return "zero";
  if (!std::isnormal(scale)) return "denormal";
  return nullptr;
}

int64_t TrtVersion::HeaderNumber() const {
  if (major >= kFirstSixDigitMajor) return major * 10000LL + minor * 100LL + patch;
  return major * 1000LL + minor * 100LL + patch;
}

std::string TrtVersion::ToString() const { return fmt::format("{}.{}.{}", major, minor, patch); }

Result<TrtVersion> ParseTrtVersion(const std::string& text) {
  TrtVersion v;
  int fields[3] = {0, 0, 0};
  int count = 0;
  size_t pos = 0;
  while (pos <= text.size() && count < 3) {
    size_t end = text.find('.', pos);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(pos, end - pos);
    QK_RETURN_IF_NOT(!part.empty() && part.size() <= 3 &&
                         part.find_first_not_of("0123456789") == std::string::npos,
                     StatusCode::kInvalidArgument,
                     "TensorRT version '{}' is not of the form MAJOR.MINOR[.PATCH]", text);
    fields[count++] = std::stoi(part);
    pos = end + 1;
    if (end == text.size()) break;
  }
  QK_RETURN_IF_NOT(count >= 2 && pos > text.size(), StatusCode::kInvalidArgument,
                   "TensorRT version '{}' is not of the form MAJOR.MINOR[.PATCH]", text);
  v.major = fields[0];
  v.minor = fields[1];
  v.patch = fields[2];
  QK_RETURN_IF_NOT(v.major >= 5 && v.minor < 100 && v.patch < 100 &&
                       (v.major >= kFirstSixDigitMajor || (v.minor < 10 && v.patch < 100)),
                   StatusCode::kInvalidArgument,
                   "TensorRT version '{}' is outside what a cache header can encode", text);
  return v;
}

TrtVersion TrtVersionFromHeaderNumber(int64_t n) {
  TrtVersion v;
  if (n >= 100000) {
    v.major = static_cast<int>(n / 10000);
    v.minor = static_cast<int>((n / 100) % 100);
  } else {
    v.major = static_cast<int>(n / 1000);
    v.minor = static_cast<int>((n / 100) % 10);
  }
  v.patch = static_cast<int>(n % 100);
  return v;
}

const char* TrtCalibratorName(TrtCalibrator c) {
  switch (c) {
    case TrtCalibrator::kEntropy2:
      return "EntropyCalibration2";
    case TrtCalibrator::kMinMax:
      return "MinMaxCalibration";
  }
  return "?";
}

Result<TrtCalibrator> ParseTrtCalibrator(const std::string& name) {
  if (name == "EntropyCalibration2" || name == "entropy2") return TrtCalibrator::kEntropy2;
  if (name == "MinMaxCalibration" || name == "minmax") return TrtCalibrator::kMinMax;
  return MakeStatus(StatusCode::kInvalidArgument,
                    "unknown TensorRT calibrator '{}' (EntropyCalibration2, MinMaxCalibration; the "
                    "legacy header names are undocumented and not written)",
                    name);
}

std::string EncodeScaleHex(float scale) { return quant::EncodeScaleBitsHex(scale); }

Result<float> DecodeScaleHex(const std::string& hex) {
  auto scale = quant::DecodeTrtScaleHex(hex);
  // A bad value in a cache file is a bad input file, not a bad argument.
  if (!scale.ok()) return Status(StatusCode::kInvalidModel, scale.status().message());
  return scale;
}

std::string FormatTrtCache(const quant::QuantPlan& plan, const TrtCacheWriteOptions& options) {
  std::string out = fmt::format("TRT-{}-{}\n", options.version.HeaderNumber(),
                                TrtCalibratorName(options.calibrator));
  for (const auto& [name, t] : plan.tensors) {
    if (!t.quantized || t.per_channel() || t.role != quant::TensorRole::kActivation) continue;
    out += name + ": " + EncodeScaleHex(t.scale.front()) + "\n";
  }
  return out;
}

Result<TrtCache> ParseTrtCache(const std::string& text, const std::string& source_name) {
  std::istringstream in(text);
  std::string line;
  QK_RETURN_IF_NOT(static_cast<bool>(std::getline(in, line)), StatusCode::kInvalidModel,
                   "{}: empty calibration cache", source_name);
  line = TrimRight(line);
  // Header: TRT-<digits>-<algorithm>
  QK_RETURN_IF_NOT(line.rfind("TRT-", 0) == 0, StatusCode::kInvalidModel,
                   "{}:1: header '{}' does not start with 'TRT-' (not a TensorRT calibration "
                   "cache)",
                   source_name, EscapeControl(line.substr(0, 80)));
  const size_t dash = line.find('-', 4);
  const std::string digits =
      line.substr(4, dash == std::string::npos ? std::string::npos : dash - 4);
  QK_RETURN_IF_NOT(dash != std::string::npos && !digits.empty() && digits.size() <= 7 &&
                       digits.find_first_not_of("0123456789") == std::string::npos &&
                       dash + 1 < line.size(),
                   StatusCode::kInvalidModel, "{}:1: header '{}' is not TRT-<version>-<algorithm>",
                   source_name, EscapeControl(line.substr(0, 80)));
  TrtCache cache;
  cache.version_number = std::stoll(digits);
  cache.algorithm = line.substr(dash + 1);
  int line_no = 1;
  std::map<std::string, int> first_line;  // tensor -> line of its first entry
  while (std::getline(in, line)) {
    ++line_no;
    line = TrimRight(line);
    if (line.empty()) continue;
    const size_t sep = line.rfind(": ");
    QK_RETURN_IF_NOT(sep != std::string::npos && sep > 0, StatusCode::kInvalidModel,
                     "{}:{}: line '{}' is not '<tensor>: <hex scale>'", source_name, line_no,
                     EscapeControl(line.substr(0, 80)));
    auto scale = DecodeScaleHex(line.substr(sep + 2));
    if (!scale.ok()) return scale.status().WithContext(fmt::format("{}:{}", source_name, line_no));
    const std::string name = line.substr(0, sep);
    const auto [it, inserted] = first_line.emplace(name, line_no);
    QK_RETURN_IF_NOT(
        inserted, StatusCode::kInvalidModel,
        "{}:{}: tensor '{}' already has a scale on line {} (which one TensorRT keeps is not "
        "defined): remove one",
        source_name, line_no, EscapeControl(name), it->second);
    cache.scales.emplace_back(name, *scale);
  }
  return cache;
}

quant::QuantPlan PlanFromTrtCache(const TrtCache& cache) {
  quant::QuantPlan plan;
  plan.provenance.method = "cache:" + cache.algorithm;
  for (const auto& [name, scale] : cache.scales) {
    quant::TensorQuant& t =
        plan.SetScale(name, {scale}, -1, quant::TensorRole::kActivation, "cache");
    if (const char* problem = ScaleProblem(scale)) {
      t.quantized = false;
      t.reason = fmt::format("cache scale {} is {}", scale, problem);
    }
  }
  return plan;
}

Status WriteTrtCache(const std::string& path, const quant::QuantPlan& plan,
                     const TrtCacheWriteOptions& options) {
  return WriteFileAtomic(path, FormatTrtCache(plan, options));
}

Result<TrtCache> ReadTrtCache(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseTrtCache(text, path);
}

}  // namespace quantkit::formats
