// quantkit::InspectModel (include/quantkit/pipelines.h): a model's versions, inputs and outputs,
// op histogram and weights, as `quantkit inspect` prints them (text, or JSON with sorted keys).
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "onnx/import.h"
#include "onnx/inspect.h"
#include "quantkit/pipelines.h"

namespace quantkit {
namespace {

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < uint64_t{1024} * 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

nlohmann::json WeightsJson(const onnx_io::WeightStats& w) {
  return {{"count", w.count}, {"bytes", w.bytes}};
}

nlohmann::json ValuesJson(const std::vector<onnx_io::ValueSummary>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) {
    // Known dims as numbers, symbolic ones by name, unknown as "?"; null when the rank is unknown.
    nlohmann::json shape = nullptr;
    if (v.has_shape) {
      shape = nlohmann::json::array();
      for (size_t i = 0; i < v.dims.size(); ++i) {
        const bool known = i < v.dim_values.size() && v.dim_values[i] >= 0;
        shape.push_back(known ? nlohmann::json(v.dim_values[i]) : nlohmann::json(v.dims[i]));
      }
    }
    out.push_back({{"name", v.name}, {"dtype", v.dtype}, {"shape", shape}});
  }
  return out;
}

std::string ToJson(const onnx_io::ModelSummary& s) {
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& o : s.opsets) opsets[o.domain.empty() ? "ai.onnx" : o.domain] = o.version;
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [location, w] : s.external_files) files[location] = WeightsJson(w);
  nlohmann::json j = {
      {"model", s.path},
      {"ir_version", s.ir_version},
      {"opsets", opsets},
      {"producer", {{"name", s.producer_name}, {"version", s.producer_version}}},
      {"inputs", ValuesJson(s.inputs)},
      {"outputs", ValuesJson(s.outputs)},
      {"nodes", s.num_nodes},
      {"subgraphs", s.num_subgraphs},
      {"functions", s.num_functions},
      {"ops", s.op_histogram},
      {"weights",
       {{"initializers", WeightsJson(s.initializers)},
        {"inline", WeightsJson(s.inline_initializers)},
        {"external", WeightsJson(s.external_initializers)},
        {"external_files", files},
        {"sparse_initializers", WeightsJson(s.sparse_initializers)},
        {"constant_nodes", WeightsJson(s.constant_nodes)}}},
  };
  return j.dump(2) + "\n";
}

std::string ToText(const onnx_io::ModelSummary& s) {
  std::string out = fmt::format("model:      {}\n", s.path);
  std::string opsets;
  for (const auto& o : s.opsets) {
    opsets += fmt::format("{}{} {}", opsets.empty() ? "" : ", ",
                          o.domain.empty() ? "ai.onnx" : o.domain, o.version);
  }
  out += fmt::format("ir_version: {}   opsets: {}\n", s.ir_version, opsets);
  out += fmt::format("producer:   {} {}\n", s.producer_name, s.producer_version);
  auto values = [&out](const char* title, const std::vector<onnx_io::ValueSummary>& vs) {
    out += fmt::format("{} ({}):\n", title, vs.size());
    for (const auto& v : vs) out += fmt::format("  {:<24} {}\n", v.name, v.type);
  };
  values("inputs", s.inputs);
  values("outputs", s.outputs);
  out += fmt::format("nodes:      {} ({} subgraphs, {} functions)\n", s.num_nodes, s.num_subgraphs,
                     s.num_functions);
  std::string ops;
  for (const auto& [op, count] : s.op_histogram) {
    ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", op, count);
  }
  out += fmt::format("ops:        {}\n", ops);
  out += fmt::format("weights:    {} initializers, {} ({} inline, {} external)\n",
                     s.initializers.count, HumanBytes(s.initializers.bytes),
                     HumanBytes(s.inline_initializers.bytes),
                     HumanBytes(s.external_initializers.bytes));
  for (const auto& [location, w] : s.external_files) {
    out +=
        fmt::format("  external file {}: {} tensors, {}\n", location, w.count, HumanBytes(w.bytes));
  }
  out += fmt::format("            {} Constant nodes ({}), {} sparse initializers ({})\n",
                     s.constant_nodes.count, HumanBytes(s.constant_nodes.bytes),
                     s.sparse_initializers.count, HumanBytes(s.sparse_initializers.bytes));
  return out;
}

}  // namespace

Result<ModelInspection> InspectModel(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(path));
  const onnx_io::ModelSummary summary = onnx_io::Summarize(model);
  ModelInspection r;
  r.ir_version = summary.ir_version;
  r.nodes = summary.num_nodes;
  for (const auto& v : summary.inputs) r.inputs.push_back(v.name);
  for (const auto& v : summary.outputs) r.outputs.push_back(v.name);
  r.text = ToText(summary);
  r.json = ToJson(summary);
  return r;
}

}  // namespace quantkit
