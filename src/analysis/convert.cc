#include "analysis/convert.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "common/check.h"
#include "analysis/model_loading.h"
#include "formats/ranges.h"
#include "onnx/export.h"
#include "passes/extract_qdq.h"
#include "passes/insert_qdq.h"
#include "passes/strip_qdq.h"

namespace quantkit::analysis {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<quant::QuantPlan> ReadPlan(const std::string& path, ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kTrtCache: {
      QK_ASSIGN_OR_RETURN(formats::TrtCache cache, formats::ReadTrtCache(path));
      return formats::PlanFromTrtCache(cache);
    }
    case ArtifactKind::kPlanJson: return formats::ReadPlanJson(path);
    case ArtifactKind::kRangesText: return formats::ReadRangesText(path);
    case ArtifactKind::kOnnx: break;
  }
  return Status(StatusCode::kInternal, "ReadPlan: not a plan file");
}

Status WritePlan(const std::string& path, ArtifactKind kind, const quant::QuantPlan& plan,
                 const ConvertOptions& options) {
  switch (kind) {
    case ArtifactKind::kTrtCache: return formats::WriteTrtCache(path, plan, options.cache);
    case ArtifactKind::kPlanJson: return formats::WritePlanJson(path, plan);
    case ArtifactKind::kRangesText: return formats::WriteRangesText(path, plan);
    case ArtifactKind::kOnnx: break;
  }
  return Status(StatusCode::kInternal, "WritePlan: not a plan file");
}

std::string Stem(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / p.stem()).string();
}

}  // namespace

// Weighted ops none of whose inputs the plan quantizes, plus the plan's float-kept nodes: the
// layers TensorRT should keep in higher precision.
std::string LayerPrecisions(const ir::Graph& graph, const quant::QuantPlan& plan,
                            const std::string& precision) {
  std::set<std::string> layers;
  for (const auto& [node, reason] : plan.float_nodes) layers.insert(node);
  for (const ir::Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm" && op != "MatMul") continue;
    bool quantized = false;
    for (const ir::Value* in : n->inputs()) {
      const quant::TensorQuant* t = in ? plan.Find(in->name()) : nullptr;
      quantized |= t && t->quantized && t->role == quant::TensorRole::kActivation;
    }
    if (!quantized && !n->name.empty()) layers.insert(n->name);
  }
  std::string out;
  for (const std::string& l : layers) out += (out.empty() ? "" : ",") + l + ":" + precision;
  return out;
}

Result<ArtifactKind> ArtifactKindFromPath(const std::string& path) {
  if (EndsWith(path, ".onnx")) return ArtifactKind::kOnnx;
  if (EndsWith(path, ".cache") || EndsWith(path, ".calib") || EndsWith(path, ".table")) {
    return ArtifactKind::kTrtCache;
  }
  if (EndsWith(path, ".json")) return ArtifactKind::kPlanJson;
  if (EndsWith(path, ".txt") || EndsWith(path, ".ranges")) return ArtifactKind::kRangesText;
  return MakeStatus(StatusCode::kInvalidArgument,
                    "{}: unknown file kind (use .onnx, .cache/.calib/.table, .json, .txt/.ranges)",
                    path);
}

Result<ConvertResult> Convert(const ConvertOptions& options) {
  QK_ASSIGN_OR_RETURN(ArtifactKind in_kind, ArtifactKindFromPath(options.input));
  QK_ASSIGN_OR_RETURN(ArtifactKind out_kind, ArtifactKindFromPath(options.output));
  QK_RETURN_IF_NOT(fs::absolute(options.input) != fs::absolute(options.output),
                   StatusCode::kInvalidArgument, "{}: input and output are the same file; inputs "
                   "are never modified", options.input);
  ConvertResult result;

  if (in_kind == ArtifactKind::kOnnx) {
    QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(options.input));
    passes::ExtractReport report;
    QK_ASSIGN_OR_RETURN(quant::QuantPlan plan,
                        passes::ExtractQdqPlan(*model.graph, {}, &report));
    QK_RETURN_IF_NOT(report.activations + report.weights > 0, StatusCode::kInvalidArgument,
                     "{}: no QuantizeLinear/DequantizeLinear to extract (to quantize a float model "
                     "use 'quantkit calibrate', or give a cache and --model)",
                     options.input);
    plan.provenance.data_description = "extracted from " + options.input;
    result.messages.push_back(fmt::format(
        "extracted {} activation and {} weight scales, {} propagated, {} converted from asymmetric",
        report.activations, report.weights, report.propagated, report.converted_asymmetric));
    for (const std::string& note : report.notes) result.messages.push_back("warning: " + note);
    if (out_kind == ArtifactKind::kOnnx) {
      QK_ASSIGN_OR_RETURN(passes::StripReport strip, passes::StripQdq(model));
      result.messages.push_back(fmt::format(
          "stripped {} Q/DQ pairs, dequantized {} stored weights, {} left in place",
          strip.pairs_removed, strip.weights_dequantized, strip.left_in_place));
      QK_RETURN_IF_ERROR(onnx_io::ExportModel(model, options.output));
      result.written.push_back(options.output);
      const std::string stem = Stem(options.output);
      QK_RETURN_IF_ERROR(formats::WriteTrtCache(stem + ".cache", plan, options.cache));
      QK_RETURN_IF_ERROR(formats::WritePlanJson(stem + ".plan.json", plan));
      QK_RETURN_IF_ERROR(formats::WriteRangesText(stem + ".ranges.txt", plan));
      result.written.insert(result.written.end(),
                            {stem + ".cache", stem + ".plan.json", stem + ".ranges.txt"});
    } else {
      QK_RETURN_IF_ERROR(WritePlan(options.output, out_kind, plan, options));
      result.written.push_back(options.output);
    }
    result.layer_precisions = LayerPrecisions(*model.graph, plan, options.float_precision);
    return result;
  }

  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, ReadPlan(options.input, in_kind));
  if (out_kind != ArtifactKind::kOnnx) {
    QK_RETURN_IF_ERROR(WritePlan(options.output, out_kind, plan, options));
    result.written.push_back(options.output);
    result.messages.push_back(fmt::format("{} tensors ({} quantized)", plan.tensors.size(),
                                          plan.NumQuantized()));
    return result;
  }
  QK_RETURN_IF_NOT(!options.model.empty(), StatusCode::kInvalidArgument,
                   "writing a Q/DQ model from {} needs the float model: --model FLOAT.onnx",
                   options.input);
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(options.model));
  int unmatched = 0;
  for (const auto& [name, t] : plan.tensors) {
    if (!model.graph->FindValue(name)) ++unmatched;
  }
  if (unmatched) {
    result.messages.push_back(fmt::format(
        "warning: {} of {} plan tensors match no tensor of {} (names must match the model)",
        unmatched, plan.tensors.size(), options.model));
  }
  std::vector<passes::QdqSite> sites;
  if (options.placement_from_plan) {
    sites = passes::SitesFromPlan(*model.graph, plan);
    QK_RETURN_IF_NOT(!sites.empty(), StatusCode::kInvalidArgument,
                     "{}: no entry extracted from a Q/DQ model matches a tensor of {} (use the "
                     "default --placement tensorrt for calibrated plans)",
                     options.input, options.model);
  } else {
    // A fallback plan's float-kept nodes get no Q/DQ (as `quantkit fallback` simulated them).
    passes::PlacementOptions placement = options.placement;
    for (const auto& [node, reason] : plan.float_nodes) placement.exclude_nodes.insert(node);
    QK_ASSIGN_OR_RETURN(sites, passes::FindQdqSites(*model.graph, placement));
  }
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*model.graph, sites, &plan));
  // Before insertion: afterwards the weighted ops read *_dequantized values the plan does not name.
  result.layer_precisions = LayerPrecisions(*model.graph, plan, options.float_precision);
  QK_ASSIGN_OR_RETURN(passes::InsertQdqReport ins, passes::InsertQdq(model, plan, sites));
  result.messages.push_back(fmt::format("inserted {} activation and {} weight Q/DQ pairs; {} sites "
                                        "left in float",
                                        ins.activation_pairs, ins.weight_pairs, ins.skipped.size()));
  for (const std::string& s : ins.skipped) result.messages.push_back("  float: " + s);
  QK_RETURN_IF_ERROR(onnx_io::ExportModel(model, options.output));
  result.written.push_back(options.output);
  return result;
}

}  // namespace quantkit::analysis
