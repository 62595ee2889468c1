#include "analysis/float_layers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/prefix_cache.h"
#include "analysis/report_json.h"
#include "analysis/simulate.h"
#include "common/check.h"
#include "common/progress.h"
#include "ir/float16.h"

namespace quantkit::analysis {
namespace {

// Ops whose outputs are values of their inputs (moved, selected or compared, never computed):
// with inputs already in the dtype, computing them in FP32 gives the same values, so pinning them
// cannot recover anything.
const std::set<std::string>& ExactOps() {
  static const std::set<std::string> ops = {
      "Reshape",   "Flatten",       "Squeeze",      "Unsqueeze",    "Transpose",
      "Concat",    "Split",         "Slice",        "Gather",       "GatherElements",
      "GatherND",  "Identity",      "Expand",       "Tile",         "MaxPool",
      "Relu",      "Max",           "Min",          "Neg",          "Abs",
      "ReduceMax", "ReduceMin",     "DepthToSpace", "SpaceToDepth", "Dropout",
      "Where",     "GlobalMaxPool", "Sign"};
  return ops;
}

bool WritesLowPrecision(const ir::Node& n) {
  for (const ir::Value* v : n.outputs()) {
    if (v && v->type.kind == ir::TypeInfo::Kind::kTensor && ir::Is16BitFloat(v->type.dtype))
      return true;
  }
  return false;
}

bool WritesFloat32(const ir::Node& n) {
  for (const ir::Value* v : n.outputs()) {
    if (v && v->type.kind == ir::TypeInfo::Kind::kTensor && v->type.dtype == ir::DType::kFloat)
      return true;
  }
  return false;
}

bool IsTypingNode(const ir::Node& n) {
  return n.op_type() == "Cast" || n.op_type() == "QuantizeLinear" ||
         n.op_type() == "DequantizeLinear" || n.op_type() == "FakeQuantizeLinear";
}

quant::QuantPlan PinnedNodes(const quant::QuantPlan& plan, const std::vector<std::string>& nodes) {
  quant::QuantPlan p = plan;
  for (const std::string& n : nodes)
    p.float_precision.fp32_nodes.emplace(n, "analyze: computed in FP32 for this trial");
  return p;
}

quant::QuantPlan PinnedTensor(const quant::QuantPlan& plan, const std::string& tensor) {
  quant::QuantPlan p = plan;
  p.float_precision.fp32_tensors.emplace(tensor, "analyze: kept in FP32 for this trial");
  return p;
}

}  // namespace

Result<FloatLayersResult> AnalyzeFloatLayers(const PlanEvaluator& evaluator,
                                             const quant::QuantPlan& plan,
                                             const std::vector<Metric*>& metrics,
                                             const FloatLayersOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  QK_RETURN_IF_NOT(
      plan.float_precision.dtype != quant::FloatDType::kFloat32, StatusCode::kInvalidArgument,
      "the plan's float part is FP32: nothing for --layers float to check (write the plan with "
      "--float-dtype fp16 or bf16, or analyze --layers int8)");
  FloatLayersResult result;
  result.dtype = quant::FloatDTypeName(plan.float_precision.dtype);
  result.samples = evaluator.num_samples();

  // The candidates: named main-graph nodes the written model computes in the low dtype.
  QK_ASSIGN_OR_RETURN(ir::Model simulated, BuildSimulationModel(evaluator.float_model(), plan,
                                                                evaluator.options().simulation));
  std::set<std::string> float_names;
  for (const ir::Node* n : evaluator.float_model().graph->nodes()) {
    if (!n->name.empty()) float_names.insert(n->name);
  }
  std::vector<FloatLayerRow> rows;
  QK_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, simulated.graph->TopologicalOrder());
  for (const ir::Node* n : order) {
    if (IsTypingNode(*n) || n->owner() != simulated.graph.get()) continue;
    if (!WritesLowPrecision(*n)) {
      if (WritesFloat32(*n))
        ++result.already_fp32;  // an FP32 island (pinned, or the dtype cannot hold it)
      continue;
    }
    if (ExactOps().count(n->op_type()) && n->domain().empty()) {
      ++result.skipped_exact;
      continue;
    }
    for (const ir::Value* v : n->outputs()) {
      if (!v || !ir::Is16BitFloat(v->type.dtype)) continue;
      FloatLayerRow row;
      row.tensor = v->name();
      row.op_type = n->op_type();
      // The nodes that keep this tensor in FP32 when pinned: its producer and float consumers, as
      // named in the user's model (a graph output's Cast and the Q/DQ the writer adds are not).
      auto add = [&](const ir::Node* node) {
        if (!node || node->name.empty() || !float_names.count(node->name)) return false;
        if (std::find(row.nodes.begin(), row.nodes.end(), node->name) == row.nodes.end())
          row.nodes.push_back(node->name);
        return true;
      };
      bool nameable = add(n);
      for (const ir::Use& u : v->uses()) {
        if (u.node->op_type() == "Cast" && u.node->name.empty()) continue;
        if (u.node->op_type() == "QuantizeLinear" || u.node->op_type() == "FakeQuantizeLinear")
          continue;
        // Shape and Size read no value: their precision is irrelevant.
        if (u.node->op_type() == "Shape" || u.node->op_type() == "Size") continue;
        if (!IsTypingNode(*u.node)) nameable = add(u.node) && nameable;
      }
      if (!nameable) {
        ++result.skipped_unnamed;
        continue;
      }
      rows.push_back(std::move(row));
    }
  }

  QK_ASSIGN_OR_RETURN(TrialResult as_written, evaluator.EvaluatePlan(plan, metrics));
  result.plan_output = ErrorSummary::From(as_written.output);
  result.plan_metrics = as_written.metrics;
  quant::QuantPlan fp32_float = plan;
  fp32_float.float_precision.dtype = quant::FloatDType::kFloat32;
  QK_ASSIGN_OR_RETURN(TrialResult int8_only, evaluator.EvaluatePlan(fp32_float, metrics));
  result.fp32_float_output = ErrorSummary::From(int8_only.output);
  result.fp32_float_metrics = int8_only.metrics;
  result.cost = result.plan_output.rel_mse - result.fp32_float_output.rel_mse;
  result.trials = 2;

  const int64_t budget = options.cache_bytes > 0 ? options.cache_bytes : kDefaultPrefixCacheBytes;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<PrefixCache> cache,
                      PrefixCache::Create(evaluator, plan, budget));
  Progress progress("float layers", static_cast<int64_t>(rows.size()), "nodes");
  if (!options.progress) progress.set_enabled(false);
  for (FloatLayerRow& row : rows) {
    QK_ASSIGN_OR_RETURN(TrialResult t, evaluator.EvaluatePlan(PinnedTensor(plan, row.tensor),
                                                              metrics, nullptr, cache.get()));
    row.output = ErrorSummary::From(t.output);
    row.metrics = t.metrics;
    row.recovery = result.plan_output.rel_mse - row.output.rel_mse;
    ++result.trials;
    progress.Advance(1);
  }
  progress.Finish();
  std::stable_sort(rows.begin(), rows.end(), [](const FloatLayerRow& a, const FloatLayerRow& b) {
    return a.recovery > b.recovery;
  });

  // Worth acting on only when FP16 adds a visible share to the INT8 error.
  const double int8_error = result.fp32_float_output.rel_mse;
  if (result.cost > 0 && result.cost >= kFloatCostShare * int8_error) {
    double recovered = 0;
    std::vector<std::string> nodes, tensors;
    for (const FloatLayerRow& row : rows) {
      if (recovered >= kTargetRecoveryShare * result.cost ||
          row.recovery < kMinNodeRecoveryShare * result.cost)
        break;
      for (const std::string& n : row.nodes) {
        if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
      }
      tensors.push_back(row.tensor);
      recovered += row.recovery;
    }
    // A few FP32 islands that leave most of the cost in place are not worth their Casts.
    if (recovered >= kMinRecommendedShare * result.cost) {
      result.keep_fp32 = std::move(nodes);
      result.keep_tensors = std::move(tensors);
    }
  }
  if (!result.keep_fp32.empty()) {
    QK_ASSIGN_OR_RETURN(TrialResult t, evaluator.EvaluatePlan(PinnedNodes(plan, result.keep_fp32),
                                                              metrics, nullptr, cache.get()));
    result.recommended_output = ErrorSummary::From(t.output);
    result.recommended_metrics = t.metrics;
    ++result.trials;
  }
  result.rows = std::move(rows);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

using report::ErrorJson;
using report::Join;
using report::Num;

std::string FormatFloatLayersTable(const FloatLayersResult& r, size_t max_rows) {
  std::string s = fmt::format(
      "float part ({}): output rel MSE {:.3e} as written, {:.3e} with FP32 float parts; {} costs {:+.3e} ({:+.1f}% "
      "of the INT8 error)\n",
      r.dtype, r.plan_output.rel_mse, r.fp32_float_output.rel_mse, r.dtype, r.cost,
      r.fp32_float_output.rel_mse > 0 ? 100.0 * r.cost / r.fp32_float_output.rel_mse : 0.0);
  for (const auto& [name, v] : r.plan_metrics) {
    s += fmt::format("{}: {} {:.4f}, FP32 float parts {:.4f}\n", name, r.dtype, v,
                     r.fp32_float_metrics.at(name));
  }
  s += fmt::format("{:>4} {:<32} {:<18} {:>13} {:>10}  {}\n", "rank", "tensor", "written by",
                   "FP32 relMSE", "recovered", "nodes to keep in FP32");
  for (size_t i = 0; i < r.rows.size() && i < max_rows; ++i) {
    const FloatLayerRow& row = r.rows[i];
    const double share = r.cost > 0 ? 100.0 * row.recovery / r.cost : 0.0;
    s += fmt::format("{:>4} {:<32} {:<18} {:>13.3e} {:>9.1f}%  {}\n", i + 1, row.tensor,
                     row.op_type, row.output.rel_mse, share, Join(row.nodes));
  }
  if (r.rows.size() > max_rows)
    s += fmt::format("... {} more (--top 0 or --json for all)\n", r.rows.size() - max_rows);
  s += fmt::format(
      "{} tensor(s) checked; skipped: {} node(s) exact in {} (data movement, Relu, MaxPool...), "
      "{} tensor(s) with an unnamed producer or consumer; {} node(s) already FP32\n",
      r.rows.size(), r.skipped_exact, r.dtype, r.skipped_unnamed, r.already_fp32);
  if (!r.keep_fp32.empty()) {
    std::string flags;
    for (const std::string& n : r.keep_fp32)
      flags += (flags.empty() ? "--keep-fp32 " : " --keep-fp32 ") + n;
    s += fmt::format(
        "fix: {} (keeps {} in FP32; output rel MSE {:.3e} -> {:.3e}; with FP32 float parts {:.3e})\n",
        flags, Join(r.keep_tensors), r.plan_output.rel_mse, r.recommended_output.rel_mse,
        r.fp32_float_output.rel_mse);
  } else if (r.cost > 0 && r.cost >= kFloatCostShare * r.fp32_float_output.rel_mse) {
    s += fmt::format(
        "the {} cost is spread over the graph: no few tensors recover {:.0f}% of it "
        "(--float-dtype fp32 removes it)\n",
        r.dtype, 100.0 * kMinRecommendedShare);
  } else {
    s += fmt::format("{} costs less than {:.0f}% of the INT8 error: no node needs FP32\n", r.dtype,
                     100.0 * kFloatCostShare);
  }
  s += fmt::format("{} trials in {:.2f} s\n", r.trials, r.seconds);
  return s;
}

std::string FloatLayersJson(const FloatLayersResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const FloatLayerRow& row = r.rows[i];
    rows.push_back({{"rank", i + 1},
                    {"tensor", row.tensor},
                    {"producer_op", row.op_type},
                    {"nodes", row.nodes},
                    {"pinned_output", ErrorJson(row.output)},
                    {"recovery", Num(row.recovery)},
                    {"metrics", row.metrics}});
  }
  nlohmann::json j{{"dtype", r.dtype},
                   {"samples", r.samples},
                   {"trials", r.trials},
                   {"seconds", r.seconds},
                   {"output", ErrorJson(r.plan_output)},
                   {"fp32_float_output", ErrorJson(r.fp32_float_output)},
                   {"metrics", r.plan_metrics},
                   {"fp32_float_metrics", r.fp32_float_metrics},
                   {"cost", Num(r.cost)},
                   {"tensors", rows},
                   {"keep_fp32", r.keep_fp32},
                   {"keep_tensors", r.keep_tensors},
                   {"skipped_exact", r.skipped_exact},
                   {"skipped_unnamed", r.skipped_unnamed},
                   {"already_fp32", r.already_fp32}};
  if (!r.keep_fp32.empty()) {
    j["recommended_output"] = ErrorJson(r.recommended_output);
    j["recommended_metrics"] = r.recommended_metrics;
  }
  return j.dump(1);
}

std::string FormatAnalyzeReport(const AnalyzeResult* int8, const FloatLayersResult* floats,
                                size_t max_rows) {
  std::string s;
  if (int8)
    s += FormatAnalyzeTable(*int8,
                            max_rows ? std::min(max_rows, int8->rows.size()) : int8->rows.size());
  if (int8 && floats) s += "\n";
  if (floats) s += FormatFloatLayersTable(*floats, max_rows ? max_rows : floats->rows.size());
  return s;
}

std::string AnalyzeReportJson(const AnalyzeResult* int8, const FloatLayersResult* floats) {
  nlohmann::json j = int8 ? nlohmann::json::parse(AnalyzeJson(*int8)) : nlohmann::json::object();
  if (floats) j["float_layers"] = nlohmann::json::parse(FloatLayersJson(*floats));
  return j.dump(1);
}

}  // namespace quantkit::analysis
