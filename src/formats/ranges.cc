#include "formats/ranges.h"

#include <fmt/format.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/check.h"
#include "common/file_util.h"
#include "common/text.h"

namespace quantkit::formats {
namespace {

using nlohmann::json;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Status CheckKeys(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    QK_RETURN_IF_NOT(allowed.count(it.key()) != 0, StatusCode::kInvalidModel,
                     "{}: unknown key '{}'", where, EscapeControl(it.key()));
  }
  return Status::Ok();
}

// Typed reads of optional keys. A value of the wrong type is an error naming the key path and
// the expected type ("p.json: tensors.x.scale[2]: expected a number, got string"), never the
// JSON library's exception text (which used to escape as exit 70).
Status TypeError(const std::string& path, const char* expected, const json& got) {
  return MakeStatus(StatusCode::kInvalidModel, "{}: expected {}, got {}", path, expected,
                    got.type_name());
}

Status Read(const json& v, const std::string& path, std::string* out) {
  if (!v.is_string()) return TypeError(path, "a string", v);
  *out = v.get<std::string>();
  return Status::Ok();
}
Status Read(const json& v, const std::string& path, bool* out) {
  if (!v.is_boolean()) return TypeError(path, "true or false", v);
  *out = v.get<bool>();
  return Status::Ok();
}
Status Read(const json& v, const std::string& path, int64_t* out) {
  if (!v.is_number_integer()) return TypeError(path, "an integer", v);
  *out = v.get<int64_t>();
  return Status::Ok();
}
Status Read(const json& v, const std::string& path, int32_t* out) {
  int64_t wide = 0;
  QK_RETURN_IF_ERROR(Read(v, path, &wide));
  QK_RETURN_IF_NOT(wide >= INT32_MIN && wide <= INT32_MAX, StatusCode::kInvalidModel,
                   "{}: {} does not fit a 32-bit integer", path, wide);
  *out = static_cast<int32_t>(wide);
  return Status::Ok();
}
Status Read(const json& v, const std::string& path, float* out) {
  if (!v.is_number()) return TypeError(path, "a number", v);
  // Range-checked in double: converting an out-of-range double to float is undefined.
  const double d = v.get<double>();
  QK_RETURN_IF_NOT(std::isfinite(d) && std::fabs(d) <= FLT_MAX, StatusCode::kInvalidModel,
                   "{}: {} is outside the float32 range", path, d);
  *out = static_cast<float>(d);
  return Status::Ok();
}
template <typename T>
Status Read(const json& v, const std::string& path, std::vector<T>* out) {
  if (!v.is_array()) return TypeError(path, "an array", v);
  out->assign(v.size(), T{});
  for (size_t i = 0; i < v.size(); ++i) {
    QK_RETURN_IF_ERROR(Read(v[i], fmt::format("{}[{}]", path, i), &(*out)[i]));
  }
  return Status::Ok();
}
Status Read(const json& v, const std::string& path, std::map<std::string, std::string>* out) {
  if (!v.is_object()) return TypeError(path, "an object of strings", v);
  for (auto it = v.begin(); it != v.end(); ++it) {
    QK_RETURN_IF_ERROR(Read(it.value(), path + "." + EscapeControl(it.key()), &(*out)[it.key()]));
  }
  return Status::Ok();
}

// Reads obj[key] into *out when present (absent keys keep the default).
template <typename T>
Status ReadKey(const json& obj, const char* key, const std::string& path, T* out) {
  const auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  return Read(*it, path.empty() ? std::string(key) : path + "." + key, out);
}

json TensorToJson(const quant::TensorQuant& t) {
  return json{
      {"quantized", t.quantized},         {"reason", t.reason}, {"role", TensorRoleName(t.role)},
      {"dtype", QuantDTypeName(t.dtype)}, {"scale", t.scale},   {"amax", t.amax},
      {"zero_point", t.zero_point},       {"axis", t.axis},     {"source", t.source}};
}

// `where` is "FILE: tensors.NAME" (file and key path, for messages).
Result<quant::TensorQuant> TensorFromJson(const std::string& name, const json& j,
                                          const std::string& where) {
  QK_RETURN_IF_NOT(j.is_object(), StatusCode::kInvalidModel, "{}: expected an object, got {}",
                   where, j.type_name());
  QK_RETURN_IF_ERROR(CheckKeys(
      j, {"quantized", "reason", "role", "dtype", "scale", "amax", "zero_point", "axis", "source"},
      where));
  quant::TensorQuant t;
  t.tensor = name;
  std::string role = "activation", dtype = "int8";
  QK_RETURN_IF_ERROR(ReadKey(j, "quantized", where, &t.quantized));
  QK_RETURN_IF_ERROR(ReadKey(j, "reason", where, &t.reason));
  QK_RETURN_IF_ERROR(ReadKey(j, "role", where, &role));
  QK_RETURN_IF_ERROR(ReadKey(j, "dtype", where, &dtype));
  QK_RETURN_IF_ERROR(ReadKey(j, "scale", where, &t.scale));
  QK_RETURN_IF_ERROR(ReadKey(j, "amax", where, &t.amax));
  QK_RETURN_IF_ERROR(ReadKey(j, "zero_point", where, &t.zero_point));
  QK_RETURN_IF_ERROR(ReadKey(j, "axis", where, &t.axis));
  QK_RETURN_IF_ERROR(ReadKey(j, "source", where, &t.source));
  QK_ASSIGN_OR_RETURN(t.role, quant::ParseTensorRole(role));
  QK_ASSIGN_OR_RETURN(t.dtype, quant::ParseQuantDType(dtype));
  if (t.quantized) {
    // TensorRT is symmetric int8 only. quantkit has one conversion rule for asymmetric ranges
    // (quant/symmetric_conversion.h) and applies it where it reads Q/DQ and QOperator models,
    // reporting the cost; a plan file is the user's statement of the exact scales, so it is
    // not rewritten behind their back: an asymmetric entry is refused.
    QK_RETURN_IF_NOT(
        t.dtype == quant::QuantDType::kInt8, StatusCode::kUnsupported,
        "{}.dtype: uint8 plans are not supported (TensorRT quantizes to symmetric int8); "
        "convert the Q/DQ model instead (quantkit convert MODEL.onnx OUT.onnx applies the "
        "symmetric rule and reports its cost)",
        where);
    for (size_t i = 0; i < t.zero_point.size(); ++i) {
      QK_RETURN_IF_NOT(
          t.zero_point[i] == 0, StatusCode::kUnsupported,
          "{}.zero_point[{}]: {} is not 0 (TensorRT quantizes symmetrically); convert the "
          "Q/DQ model instead (quantkit convert MODEL.onnx OUT.onnx)",
          where, i, t.zero_point[i]);
    }
  }
  return t;
}

}  // namespace

std::string FormatRangesText(const quant::QuantPlan& plan) {
  std::string out;
  for (const auto& [name, t] : plan.tensors) {
    if (!t.quantized || t.per_channel()) continue;
    // {} prints the shortest decimal that reads back as the same float.
    out += fmt::format("{}:{}\n", name, t.amax.front());
  }
  return out;
}

Result<quant::QuantPlan> ParseRangesText(const std::string& text, const std::string& source_name) {
  quant::QuantPlan plan;
  plan.provenance.method = "ranges";
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t sep = line.rfind(':');
    QK_RETURN_IF_NOT(sep != std::string::npos && sep > 0, StatusCode::kInvalidModel,
                     "{}:{}: line '{}' is not '<tensor>:<amax>'", source_name, line_no, line);
    const std::string name = Trim(line.substr(0, sep));
    const std::string value = Trim(line.substr(sep + 1));
    char* end = nullptr;
    const float amax = std::strtof(value.c_str(), &end);
    QK_RETURN_IF_NOT(!value.empty() && end == value.c_str() + value.size(),
                     StatusCode::kInvalidModel, "{}:{}: '{}' is not a number", source_name, line_no,
                     value);
    // An amax is a magnitude: NaN, Inf or a negative value is a broken file, not a range (0 is
    // a dead tensor: kept in float below, with the reason).
    QK_RETURN_IF_NOT(std::isfinite(amax) && amax >= 0.0f, StatusCode::kInvalidModel,
                     "{}:{}: tensor '{}' has range {}; a range (amax) is finite and not negative",
                     source_name, line_no, EscapeControl(name), value);
    quant::TensorQuant& t = plan.SetActivationAmax(name, amax, "ranges");
    if (!t.quantized) t.reason = fmt::format("{}:{}: {}", source_name, line_no, t.reason);
  }
  return plan;
}

std::string FormatPlanJson(const quant::QuantPlan& plan) {
  json tensors = json::object();
  for (const auto& [name, t] : plan.tensors) tensors[name] = TensorToJson(t);
  const quant::Provenance& p = plan.provenance;
  json j{{"format", kPlanJsonFormat},
         {"version", kPlanJsonVersion},
         {"provenance",
          {{"model_sha256", p.model_sha256},
           {"data_description", p.data_description},
           {"data_sha256", p.data_sha256},
           {"method", p.method},
           {"quantkit_version", p.quantkit_version},
           {"num_samples", p.num_samples}}},
         {"float_nodes", plan.float_nodes},
         {"float_precision",
          {{"dtype", quant::FloatDTypeName(plan.float_precision.dtype)},
           {"cast_io", plan.float_precision.cast_io},
           {"fp32_nodes", plan.float_precision.fp32_nodes},
           {"fp32_op_types", plan.float_precision.fp32_op_types},
           {"fp32_tensors", plan.float_precision.fp32_tensors}}},
         {"tensors", tensors}};
  // Only plans a PTQ stage edited carry these: other plan files stay as they were.
  if (!p.stages.empty()) j["provenance"]["stages"] = p.stages;
  if (!p.float_model_sha256.empty()) j["provenance"]["float_model_sha256"] = p.float_model_sha256;
  return j.dump(1) + "\n";  // nlohmann's object is a sorted map: key-sorted output
}

Result<quant::QuantPlan> ParsePlanJson(const std::string& text, const std::string& source_name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  QK_RETURN_IF_NOT(!j.is_discarded() && j.is_object(), StatusCode::kInvalidModel,
                   "{}: not a JSON object", source_name);
  QK_RETURN_IF_ERROR(
      CheckKeys(j, {"format", "version", "provenance", "float_nodes", "float_precision", "tensors"},
                source_name));
  const std::string file = source_name + ": ";
  std::string format;
  int64_t version = -1;
  QK_RETURN_IF_ERROR(ReadKey(j, "format", "", &format).WithContext(source_name));
  QK_RETURN_IF_NOT(format == kPlanJsonFormat, StatusCode::kInvalidModel,
                   "{}format is '{}', expected '{}'", file, EscapeControl(format), kPlanJsonFormat);
  QK_RETURN_IF_ERROR(ReadKey(j, "version", "", &version).WithContext(source_name));
  QK_RETURN_IF_NOT(version == kPlanJsonVersion, StatusCode::kInvalidModel,
                   "{}plan version {} is not supported (this quantkit reads version {})", file,
                   version, kPlanJsonVersion);
  quant::QuantPlan plan;
  if (const auto p = j.find("provenance"); p != j.end()) {
    QK_RETURN_IF_NOT(p->is_object(), StatusCode::kInvalidModel,
                     "{}provenance: expected an object, got {}", file, p->type_name());
    QK_RETURN_IF_ERROR(
        CheckKeys(*p,
                  {"model_sha256", "data_description", "data_sha256", "method", "quantkit_version",
                   "num_samples", "stages", "float_model_sha256"},
                  file + "provenance"));
    quant::Provenance& pv = plan.provenance;
    QK_RETURN_IF_ERROR(
        ReadKey(*p, "model_sha256", "provenance", &pv.model_sha256).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*p, "data_description", "provenance", &pv.data_description)
                           .WithContext(source_name));
    QK_RETURN_IF_ERROR(
        ReadKey(*p, "data_sha256", "provenance", &pv.data_sha256).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*p, "method", "provenance", &pv.method).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*p, "quantkit_version", "provenance", &pv.quantkit_version)
                           .WithContext(source_name));
    QK_RETURN_IF_ERROR(
        ReadKey(*p, "num_samples", "provenance", &pv.num_samples).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*p, "stages", "provenance", &pv.stages).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*p, "float_model_sha256", "provenance", &pv.float_model_sha256)
                           .WithContext(source_name));
  }
  QK_RETURN_IF_ERROR(ReadKey(j, "float_nodes", "", &plan.float_nodes).WithContext(source_name));
  // Absent in plans written before the float dtype was recorded: their models were all FP32.
  if (const auto f = j.find("float_precision"); f != j.end()) {
    QK_RETURN_IF_NOT(f->is_object(), StatusCode::kInvalidModel,
                     "{}float_precision: expected an object, got {}", file, f->type_name());
    QK_RETURN_IF_ERROR(
        CheckKeys(*f, {"dtype", "cast_io", "fp32_nodes", "fp32_op_types", "fp32_tensors"},
                  file + "float_precision"));
    quant::FloatPrecision& fp = plan.float_precision;
    std::string dtype = quant::FloatDTypeName(fp.dtype);
    QK_RETURN_IF_ERROR(ReadKey(*f, "dtype", "float_precision", &dtype).WithContext(source_name));
    Result<quant::FloatDType> parsed = quant::ParseFloatDType(dtype);
    QK_RETURN_IF_NOT(parsed.ok(), StatusCode::kInvalidModel,
                     "{}float_precision.dtype: '{}' is not fp32, fp16 or bf16", file,
                     EscapeControl(dtype));
    fp.dtype = *parsed;
    QK_RETURN_IF_ERROR(
        ReadKey(*f, "cast_io", "float_precision", &fp.cast_io).WithContext(source_name));
    QK_RETURN_IF_ERROR(
        ReadKey(*f, "fp32_nodes", "float_precision", &fp.fp32_nodes).WithContext(source_name));
    QK_RETURN_IF_ERROR(ReadKey(*f, "fp32_op_types", "float_precision", &fp.fp32_op_types)
                           .WithContext(source_name));
    QK_RETURN_IF_ERROR(
        ReadKey(*f, "fp32_tensors", "float_precision", &fp.fp32_tensors).WithContext(source_name));
  }
  if (const auto tensors = j.find("tensors"); tensors != j.end()) {
    QK_RETURN_IF_NOT(tensors->is_object(), StatusCode::kInvalidModel,
                     "{}tensors: expected an object, got {}", file, tensors->type_name());
    for (auto it = tensors->begin(); it != tensors->end(); ++it) {
      QK_ASSIGN_OR_RETURN(
          plan.tensors[it.key()],
          TensorFromJson(it.key(), it.value(), file + "tensors." + EscapeControl(it.key())));
    }
  }
  QK_RETURN_IF_ERROR(quant::ValidatePlan(plan).WithContext(source_name));
  return plan;
}

Status WriteRangesText(const std::string& path, const quant::QuantPlan& plan) {
  return WriteFileAtomic(path, FormatRangesText(plan));
}

Result<quant::QuantPlan> ReadRangesText(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseRangesText(text, path);
}

Status WritePlanJson(const std::string& path, const quant::QuantPlan& plan) {
  return WriteFileAtomic(path, FormatPlanJson(plan));
}

Result<quant::QuantPlan> ReadPlanJson(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParsePlanJson(text, path);
}

}  // namespace quantkit::formats
