#include "pipelines/convert/convert.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "formats/plan_files.h"
#include "formats/ranges.h"
#include "ir/scopes.h"
#include "onnx/export.h"
#include "passes/apply_plan.h"
#include "passes/extract_qdq.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_pairs.h"
#include "passes/qop_to_qdq.h"
#include "passes/strip_qdq.h"
#include "pipelines/calibration_steps.h"
#include "pipelines/evaluate/evaluate.h"
#include "pipelines/quantized_artifacts.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

// Sites ApplyPlan looked at: paired or left in float (0 when the plan matches nothing).
size_t SitesConsidered(const passes::PassReport& inserted) {
  return static_cast<size_t>(inserted.Count(passes::counter::kActivationPairs) +
                             inserted.Count(passes::counter::kWeightPairs)) +
         inserted.List(passes::list::kSkipped).size();
}

// ApplyPlan's summary line, then one line per site left in float.
void AddInsertionMessages(const passes::PassReport& inserted, ConvertResult* result) {
  result->messages.push_back(inserted.summary);
  for (const std::string& s : inserted.List(passes::list::kSkipped))
    result->messages.push_back("  float: " + s);
  for (const std::string& s : inserted.List(passes::list::kFp32NodeReasons))
    result->messages.push_back("  fp32: " + s);
  for (const std::string& s : inserted.notes) result->messages.push_back("note: " + s);
}

passes::ApplyPlanOptions ApplyOptions(const ConvertOptions& options) {
  passes::ApplyPlanOptions apply;
  apply.placement = options.placement;
  apply.mode = options.placement_from_plan ? passes::PlacementPolicy::kPlan
                                           : passes::PlacementPolicy::kTensorRT;
  apply.weight_storage = options.weight_storage;
  return apply;
}

// The float part of the Q/DQ model convert writes: the options', else a plan.json's own, else
// the defaults; then which tensors the dtype cannot hold, from --data (one range-only pass of
// the float model at `float_model`) or, without data, from the ranges the plan itself holds (a
// TensorRT cache has one for every tensor).
Status SetFloatPrecision(const ConvertOptions& options, const ir::Graph& graph, bool plan_has_own,
                         const std::string& float_model, quant::QuantPlan* plan,
                         ConvertResult* result) {
  quant::FloatPrecision& fp = plan->float_precision;
  if (options.floats || !plan_has_own) {
    const quant::FloatDType before = fp.dtype;
    QK_RETURN_IF_ERROR(
        passes::ResolveFloatOptions(graph, options.floats.value_or(passes::FloatOptions{}), &fp));
    if (fp.dtype != before) fp.fp32_tensors.clear();  // decided for another dtype
  }
  const char* dtype = quant::FloatDTypeName(fp.dtype);
  if (fp.dtype == quant::FloatDType::kFloat32) return Status::Ok();
  const int64_t from_plan = passes::MarkPlanRangeFp32Tensors(plan);
  if (!options.data.empty()) {
    QK_ASSIGN_OR_RETURN(LoadedModel loaded, LoadFloatModel(float_model));
    QK_ASSIGN_OR_RETURN(Statistics ranges,
                        CollectFloatRanges(loaded, options.data, options.image, options.samples,
                                           options.batch_size, /*progress=*/false));
    const size_t before = fp.fp32_tensors.size();
    const int64_t measured = MarkFp32Tensors(ranges, &fp);
    result->messages.push_back(
        fmt::format("float dtype {}: ranges of {} float tensors measured on {}: {} stay FP32",
                    dtype, measured, ranges.data_description,
                    static_cast<int64_t>(fp.fp32_tensors.size() - before) + from_plan));
  } else {
    result->messages.push_back(fmt::format(
        "float dtype {}: {} tensor(s) stay FP32 from the plan's ranges; the other float tensors were not measured "
        "(give --data to check that {} holds them)",
        dtype, from_plan, dtype));
  }
  for (const auto& [name, why] : fp.fp32_tensors)
    result->messages.push_back("  fp32: " + name + ": " + why);
  return Status::Ok();
}

// The written model (`staged`: the file before it is committed as options.output) against the float
// model on --data: what the migration changes. Run before the commit, so that a check that cannot
// run (data the model does not take) leaves no output behind.
Status CheckAccuracy(const ConvertOptions& options, const std::string& staged,
                     ConvertResult* result) {
  EvalOptions eval;
  eval.model = staged;
  eval.reference_model = options.model;
  eval.data = options.data;
  eval.image = options.image;
  eval.samples = options.samples;
  eval.batch_size = options.batch_size;
  eval.progress = false;
  Result<EvalResult> evaluated = Evaluate(eval);
  if (!evaluated.ok()) {
    // Name the output as the user gave it, not its staging path.
    std::string message = evaluated.status().message();
    for (size_t at = message.find(staged); at != std::string::npos; at = message.find(staged, at)) {
      message.replace(at, staged.size(), options.output);
      at += options.output.size();
    }
    return Status(
        evaluated.status().code(),
        fmt::format("{} (the check on --data {}; nothing was written)", message, options.data));
  }
  EvalResult& written = evaluated.value();
  ConvertResult::Accuracy a;
  a.data = options.data;
  a.samples = written.samples;
  a.top1 = written.top1;
  if (written.agreement) {
    a.argmax_agreement = written.agreement->argmax_agreement;
    a.cosine = written.agreement->cosine;
    a.sqnr_db = written.agreement->sqnr_db;
  }
  if (written.top1) {
    EvalOptions fp32 = eval;
    fp32.model = options.model;
    fp32.reference_model.clear();
    QK_ASSIGN_OR_RETURN(EvalResult reference, Evaluate(fp32));
    a.fp32_top1 = reference.top1;
  }
  std::string line = fmt::format(
      "accuracy of {} against {} on {} ({} samples): argmax agreement {:.2f}%, cosine "
      "{:.6f}, SQNR {:.1f} dB",
      options.output, options.model, options.data, a.samples, 100 * a.argmax_agreement, a.cosine,
      a.sqnr_db);
  if (a.top1 && a.fp32_top1) {
    line += fmt::format("; top-1 {:.2f}% (FP32 {:.2f}%, {:+.2f} points)", 100 * *a.top1,
                        100 * *a.fp32_top1, 100 * (*a.top1 - *a.fp32_top1));
  }
  result->messages.push_back(line);
  result->accuracy = a;
  return Status::Ok();
}

// Per Q/DQ unit (keyed as ExtractQdqPlan keys the plan), the cost of the symmetric-int8 rule;
// only units whose grid changes are listed. Units extract cannot read are skipped (it notes them).
std::vector<ConversionCost> ConversionCosts(const ir::Graph& graph) {
  std::map<std::string, ConversionCost> by_name;
  for (const passes::QdqUnit& u : passes::FindQdqUnits(graph)) {
    if (!u.constant_params || u.scale.empty()) continue;
    ConversionCost cost;
    cost.tensor = u.q ? u.x->name() : u.y->name();
    cost.role = u.weight ? quant::TensorRole::kWeight : quant::TensorRole::kActivation;
    cost.source_dtype = std::string(ir::DTypeName(u.quant_dtype));
    cost.channels = static_cast<int64_t>(u.scale.size());
    bool ok = true;
    for (size_t c = 0; c < u.scale.size() && ok; ++c) {
      const int32_t z = c < u.zero_point.size() ? u.zero_point[c] : 0;
      Result<quant::SymmetricConversion> r = quant::ToSymmetricInt8(u.scale[c], z, u.quant_dtype);
      ok = r.ok();
      if (ok && (c == 0 || r->bits_lost > cost.worst.bits_lost)) {
        cost.worst = *r;
        cost.zero_point = z;
      }
    }
    if (ok && cost.worst.changed) by_name[cost.tensor] = cost;
  }
  std::vector<ConversionCost> out;
  for (auto& [name, c] : by_name) out.push_back(std::move(c));
  return out;
}

std::string Stem(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / p.stem()).string();
}

}  // namespace

std::string DescribeCost(const ConversionCost& c) {
  const quant::SymmetricConversion& w = c.worst;
  std::string out = fmt::format(
      "{} ({}{}): {} zp {} [{:.6g}, {:.6g}] step {:.6g} -> int8 step {:.6g}: x{:.3f} step, {:.2f} "
      "bits lost, {:.1f}% of int8 codes unused, {:.1f}% of the old range clipped",
      c.tensor, quant::TensorRoleName(c.role),
      c.channels > 1 ? fmt::format(", worst of {} channels", c.channels) : "", c.source_dtype,
      c.zero_point, w.lo, w.hi, w.scale_from, w.scale_to, w.scale_ratio, w.bits_lost,
      100.0 * w.wasted_share, 100.0 * w.clipped_share);
  if (w.sign_bit_wasted) {
    out +=
        "; sign bit wasted: the range is non-negative (e.g. after Relu), symmetric int8 "
        "spends 1 bit on negatives that never occur";
  }
  return out;
}

std::string ConvertResultJson(const ConvertResult& r) {
  nlohmann::json costs = nlohmann::json::array();
  for (const ConversionCost& c : r.costs) {
    const quant::SymmetricConversion& w = c.worst;
    costs.push_back({{"tensor", c.tensor},
                     {"role", quant::TensorRoleName(c.role)},
                     {"source_dtype", c.source_dtype},
                     {"zero_point", c.zero_point},
                     {"channels", c.channels},
                     {"lo", w.lo},
                     {"hi", w.hi},
                     {"scale_from", w.scale_from},
                     {"scale_to", w.scale_to},
                     {"amax", w.amax},
                     {"scale_ratio", w.scale_ratio},
                     {"bits_lost", w.bits_lost},
                     {"wasted_share", w.wasted_share},
                     {"clipped_share", w.clipped_share},
                     {"sign_bit_wasted", w.sign_bit_wasted}});
  }
  nlohmann::json j{{"written", r.written},
                   {"messages", r.messages},
                   {"layer_precisions", r.layer_precisions},
                   {"integer_ops", r.integer_ops},
                   {"dynamic_tensors", r.dynamic_tensors},
                   {"conversion_costs", costs}};
  return j.dump(1) + "\n";
}

Result<ConvertResult> Convert(const ConvertOptions& options) {
  QK_ASSIGN_OR_RETURN(formats::ArtifactKind in_kind, formats::ArtifactKindFromPath(options.input));
  QK_ASSIGN_OR_RETURN(formats::ArtifactKind out_kind,
                      formats::ArtifactKindFromPath(options.output));
  QK_RETURN_IF_NOT(fs::absolute(options.input) != fs::absolute(options.output),
                   StatusCode::kInvalidArgument,
                   "{}: input and output are the same file; inputs "
                   "are never modified",
                   options.input);
  ConvertResult result;
  // --data only feeds the check of a written Q/DQ model (plan + --model): anywhere else it would
  // be read by nothing, which the user should hear rather than believe it was checked.
  QK_RETURN_IF_NOT(
      options.data.empty() || in_kind == formats::ArtifactKind::kOnnx ||
          (out_kind == formats::ArtifactKind::kOnnx && !options.model.empty()),
      StatusCode::kInvalidArgument,
      "--data checks the Q/DQ model written from {} and its float model: give OUT.onnx and --model "
      "FLOAT.onnx (writing {} checks nothing)",
      options.input, options.output);

  if (in_kind == formats::ArtifactKind::kOnnx) {
    QK_RETURN_IF_NOT(
        options.data.empty(), StatusCode::kInvalidArgument,
        "--data checks a Q/DQ model written from a plan and its float model (IN = .cache/.json/.txt, "
        "--model FLOAT.onnx)");
    QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(options.input));
    // Normalize a PyTorch export's Q/DQ; a QOperator model is rewritten to Q/DQ, after which
    // everything below applies unchanged.
    const passes::NormalizeTorchQdq normalize;
    const passes::QOperatorToQdq qoperator;
    std::vector<const passes::Pass*> rewrites{&normalize};
    result.integer_ops = passes::HasIntegerOps(*model.graph);
    if (result.integer_ops) rewrites.push_back(&qoperator);
    std::vector<passes::PassReport> reports;
    QK_RETURN_IF_ERROR(passes::RunPasses(model, rewrites, &reports));
    for (const passes::PassReport& r : reports) {
      if (!r.summary.empty()) result.messages.push_back(r.summary);
      for (const std::string& note : r.notes) result.messages.push_back("warning: " + note);
    }
    if (const passes::PassReport* qop = passes::FindReport(reports, qoperator.Name())) {
      result.dynamic_tensors = qop->List(passes::list::kDynamicTensors);
    }
    result.costs = ConversionCosts(*model.graph);
    passes::ExtractReport report;
    Result<quant::QuantPlan> extracted = passes::ExtractQdqPlan(*model.graph, {}, &report);
    if (!extracted.ok()) return extracted.status().WithContext(options.input);
    quant::QuantPlan plan = std::move(*extracted);
    // DynamicQuantizeLinear computes its scale per batch: nothing static to put in the plan.
    for (const std::string& name : result.dynamic_tensors) {
      if (plan.Find(name)) continue;
      quant::TensorQuant t;
      t.tensor = name;
      t.quantized = false;
      t.reason =
          "quantized dynamically (DynamicQuantizeLinear): no static scale; calibrate the "
          "float model (quantkit calibrate) to quantize it for TensorRT";
      t.source = "dynamic";
      plan.tensors[name] = t;
    }
    // Q/DQ that are there but give nothing (a non-constant scale, an int32 bias DQ) say so.
    QK_RETURN_IF_NOT(
        report.activations + report.weights > 0 || report.notes.empty(),
        StatusCode::kInvalidArgument, "{}: none of its Q/DQ gives a scale to extract: {}{}",
        options.input, report.notes.front(),
        report.notes.size() > 1 ? fmt::format(" (and {} more)", report.notes.size() - 1) : "");
    QK_RETURN_IF_NOT(report.activations + report.weights > 0, StatusCode::kInvalidArgument,
                     "{}: no QuantizeLinear/DequantizeLinear to extract (to quantize a float model "
                     "use 'quantkit calibrate', or give a cache and --model)",
                     options.input);
    plan.provenance.data_description = "extracted from " + options.input;
    result.messages.push_back(fmt::format(
        "extracted {} activation and {} weight scales, {} propagated, {} converted from asymmetric",
        report.activations, report.weights, report.propagated, report.converted_asymmetric));
    for (const std::string& note : report.notes) result.messages.push_back("warning: " + note);
    if (!result.dynamic_tensors.empty()) {
      result.messages.push_back(fmt::format(
          "{} activations are quantized dynamically (no static scale; marked not quantized in the "
          "plan — calibrate the float model for them)",
          result.dynamic_tensors.size()));
    }
    if (!result.costs.empty()) {
      const auto sign =
          std::count_if(result.costs.begin(), result.costs.end(),
                        [](const ConversionCost& c) { return c.worst.sign_bit_wasted; });
      result.messages.push_back(fmt::format(
          "{} tensors converted from asymmetric to symmetric int8 ({} lose the sign bit):",
          result.costs.size(), sign));
      for (const ConversionCost& c : result.costs)
        result.messages.push_back("  " + DescribeCost(c));
    }
    if (out_kind == formats::ArtifactKind::kOnnx) {
      QK_ASSIGN_OR_RETURN(passes::PassReport strip, passes::RunPass(model, passes::StripQdq()));
      result.messages.push_back(strip.summary);
      if (options.qdq_output) {
        QK_RETURN_IF_ERROR(
            SetFloatPrecision(options, *model.graph, /*plan_has_own=*/false, "", &plan, &result));
        // Re-insert symmetric int8 Q/DQ: TensorRT's recipe by default (lint-clean placements,
        // the plan's scales), or exactly where the source quantized (--placement plan).
        QK_ASSIGN_OR_RETURN(
            passes::PassReport ins,
            passes::RunPass(model, passes::ApplyPlan(&plan, ApplyOptions(options))));
        QK_RETURN_IF_NOT(SitesConsidered(ins) > 0, StatusCode::kInvalidArgument,
                         "{}: no quantized tensor to place Q/DQ on", options.input);
        AddInsertionMessages(ins, &result);
      }
      // The model and its three plan files are one unit (common/artifact_set.h).
      const std::string stem = BaseName(Stem(options.output));
      QK_ASSIGN_OR_RETURN(
          std::unique_ptr<ArtifactSet> out,
          ArtifactSet::Open(DirName(options.output), {BaseName(options.output), stem + ".cache",
                                                      stem + ".plan.json", stem + ".ranges.txt"}));
      QuantizedFiles files;
      files.model_name = BaseName(options.output);
      files.cache_name = stem + ".cache";
      files.plan_name = stem + ".plan.json";
      files.ranges_name = stem + ".ranges.txt";
      files.cache = options.cache;
      QK_RETURN_IF_ERROR(StageBuiltModel(model, plan, files, out.get()));
      QK_ASSIGN_OR_RETURN(std::vector<std::string> written, out->Commit());
      result.written.insert(result.written.end(), written.begin(), written.end());
    } else {
      QK_RETURN_IF_ERROR(formats::WritePlanFile(options.output, out_kind, plan, options.cache));
      result.written.push_back(options.output);
    }
    result.layer_precisions = LayerPrecisions(*model.graph, plan, options.float_precision);
    return result;
  }

  QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, formats::ReadPlanFile(options.input, in_kind));
  // Entries kept in float say why (a zero range, a scale TensorRT rejects); a plan with no usable
  // entry at all would write an empty cache: refused.
  for (const auto& [name, t] : plan.tensors) {
    if (!t.quantized && !t.reason.empty())
      result.messages.push_back("warning: " + name + ": " + t.reason);
  }
  QK_RETURN_IF_NOT(plan.tensors.empty() || plan.NumQuantized() > 0 || !plan.float_nodes.empty(),
                   StatusCode::kInvalidArgument,
                   "{}: none of its {} tensors has a usable scale ({}: {}); nothing to convert",
                   options.input, plan.tensors.size(), plan.tensors.begin()->first,
                   plan.tensors.begin()->second.reason);
  if (out_kind != formats::ArtifactKind::kOnnx) {
    QK_RETURN_IF_ERROR(formats::WritePlanFile(options.output, out_kind, plan, options.cache));
    result.written.push_back(options.output);
    result.messages.push_back(
        fmt::format("{} tensors ({} quantized)", plan.tensors.size(), plan.NumQuantized()));
    return result;
  }
  QK_RETURN_IF_NOT(!options.model.empty(), StatusCode::kInvalidArgument,
                   "writing a Q/DQ model from {} needs the float model: --model FLOAT.onnx",
                   options.input);
  QK_RETURN_IF_ERROR(analysis::CheckPlanFloatModel(plan, options.model));
  QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(options.model));
  int unmatched = 0;
  for (const auto& [name, t] : plan.tensors) {
    if (!ir::FindQualifiedValue(*model.graph, name)) ++unmatched;
  }
  if (unmatched) {
    result.messages.push_back(fmt::format(
        "warning: {} of {} plan tensors match no tensor of {} (names must match the model)",
        unmatched, plan.tensors.size(), options.model));
  }
  // Before insertion: afterwards the weighted ops read *_dequantized values the plan does not name.
  result.layer_precisions = LayerPrecisions(*model.graph, plan, options.float_precision);
  QK_RETURN_IF_ERROR(SetFloatPrecision(options, *model.graph,
                                       in_kind == formats::ArtifactKind::kPlanJson, options.model,
                                       &plan, &result));
  // A fallback plan's float-kept nodes get no Q/DQ, whatever the placement (as eval --plan and
  // `quantkit fallback` simulated them).
  // The model file alone, staged as every writer stages (complete or not at all).
  QuantizedFiles files;
  files.model_name = BaseName(options.output);
  files.implicit_int8 = files.plan_json = false;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactSet> out,
                      ArtifactSet::Open(DirName(options.output), {files.model_name}));
  QK_ASSIGN_OR_RETURN(
      passes::PassReport ins,
      StageQuantizedModel(std::move(model), ApplyOptions(options), &plan, files, out.get()));
  QK_RETURN_IF_NOT(!options.placement_from_plan || SitesConsidered(ins) > 0,
                   StatusCode::kInvalidArgument,
                   "{}: no entry extracted from a Q/DQ model matches a tensor of {} (use the "
                   "default --placement tensorrt for calibrated plans)",
                   options.input, options.model);
  AddInsertionMessages(ins, &result);
  if (!options.data.empty())
    QK_RETURN_IF_ERROR(CheckAccuracy(options, out->Stage(files.model_name), &result));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> written, out->Commit());
  result.written.insert(result.written.end(), written.begin(), written.end());
  return result;
}

}  // namespace quantkit::pipelines
