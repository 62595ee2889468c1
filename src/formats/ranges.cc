#include "formats/ranges.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/check.h"
#include "common/file_util.h"

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
                     "{}: unknown key '{}'", where, it.key());
  }
  return Status::Ok();
}

json TensorToJson(const quant::TensorQuant& t) {
  return json{{"quantized", t.quantized},     {"reason", t.reason},
              {"role", TensorRoleName(t.role)}, {"dtype", QuantDTypeName(t.dtype)},
              {"scale", t.scale},             {"amax", t.amax},
              {"zero_point", t.zero_point},   {"axis", t.axis},
              {"source", t.source}};
}

Result<quant::TensorQuant> TensorFromJson(const std::string& name, const json& j,
                                          const std::string& where) {
  QK_RETURN_IF_NOT(j.is_object(), StatusCode::kInvalidModel, "{}: entry is not an object", where);
  QK_RETURN_IF_ERROR(CheckKeys(j, {"quantized", "reason", "role", "dtype", "scale", "amax",
                                   "zero_point", "axis", "source"},
                               where));
  quant::TensorQuant t;
  t.tensor = name;
  t.quantized = j.value("quantized", true);
  t.reason = j.value("reason", "");
  QK_ASSIGN_OR_RETURN(t.role, quant::ParseTensorRole(j.value("role", "activation")));
  QK_ASSIGN_OR_RETURN(t.dtype, quant::ParseQuantDType(j.value("dtype", "int8")));
  t.scale = j.value("scale", std::vector<float>{});
  t.amax = j.value("amax", std::vector<float>{});
  t.zero_point = j.value("zero_point", std::vector<int32_t>{});
  t.axis = j.value("axis", int64_t{-1});
  t.source = j.value("source", "");
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
                     StatusCode::kInvalidModel, "{}:{}: '{}' is not a number", source_name,
                     line_no, value);
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
         {"tensors", tensors}};
  return j.dump(1) + "\n";  // nlohmann's object is a sorted map: key-sorted output
}

Result<quant::QuantPlan> ParsePlanJson(const std::string& text, const std::string& source_name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  QK_RETURN_IF_NOT(!j.is_discarded() && j.is_object(), StatusCode::kInvalidModel,
                   "{}: not a JSON object", source_name);
  QK_RETURN_IF_ERROR(
      CheckKeys(j, {"format", "version", "provenance", "float_nodes", "tensors"}, source_name));
  QK_RETURN_IF_NOT(j.value("format", "") == kPlanJsonFormat, StatusCode::kInvalidModel,
                   "{}: format is '{}', expected '{}'", source_name, j.value("format", ""),
                   kPlanJsonFormat);
  QK_RETURN_IF_NOT(j.value("version", -1) == kPlanJsonVersion, StatusCode::kInvalidModel,
                   "{}: plan version {} is not supported (this quantkit reads version {})",
                   source_name, j.value("version", -1), kPlanJsonVersion);
  quant::QuantPlan plan;
  try {
    if (j.contains("provenance")) {
      const json& p = j["provenance"];
      QK_RETURN_IF_ERROR(CheckKeys(p, {"model_sha256", "data_description", "data_sha256",
                                       "method", "quantkit_version", "num_samples"},
                                   source_name + ": provenance"));
      plan.provenance.model_sha256 = p.value("model_sha256", "");
      plan.provenance.data_description = p.value("data_description", "");
      plan.provenance.data_sha256 = p.value("data_sha256", "");
      plan.provenance.method = p.value("method", "");
      plan.provenance.quantkit_version = p.value("quantkit_version", "");
      plan.provenance.num_samples = p.value("num_samples", int64_t{0});
    }
    if (j.contains("float_nodes")) {
      plan.float_nodes = j["float_nodes"].get<std::map<std::string, std::string>>();
    }
    if (j.contains("tensors")) {
      for (auto it = j["tensors"].begin(); it != j["tensors"].end(); ++it) {
        QK_ASSIGN_OR_RETURN(
            plan.tensors[it.key()],
            TensorFromJson(it.key(), it.value(), source_name + ": tensor '" + it.key() + "'"));
      }
    }
  } catch (const json::exception& e) {
    return MakeStatus(StatusCode::kInvalidModel, "{}: {}", source_name, e.what());
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
