#include "analysis/float16_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/check.h"
#include "common/progress.h"
#include "ir/clone.h"
#include "ir/shape_inference.h"
#include "runtime/observer.h"

namespace quantkit::analysis {
namespace {

// Nodes that do not compute floats, or whose float results are their inputs' values (exact in
// any float type): running them in 16 bits only repeats their producers' rounding.
const std::set<std::string>& SkippedOps() {
  static const std::set<std::string> ops{
      "QuantizeLinear", "DequantizeLinear", "Cast", "CastLike", "Shape", "Size", "Constant",
      "ConstantOfShape", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
      "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile",
      "DepthToSpace", "SpaceToDepth", "Dropout", "If", "Loop", "Scan"};
  return ops;
}

bool IsFloat(const ir::Value* v) {
  if (v == nullptr) return false;
  if (v->initializer) return v->initializer->dtype() == ir::DType::kFloat;
  return v->type.is_tensor() && v->type.dtype == ir::DType::kFloat;
}

// Per batch, FloatRangeCounts of each watched tensor; batch rows travel as kCountsSize doubles.
constexpr size_t kCountsSize = 7;
void AppendCounts(const quant::FloatRangeCounts& c, std::vector<double>* out) {
  out->insert(out->end(), {static_cast<double>(c.count), c.amax, static_cast<double>(c.nonfinite),
                           static_cast<double>(c.nonzero), static_cast<double>(c.subnormal_min),
                           static_cast<double>(c.subnormal_max), c.subnormal_known ? 1.0 : 0.0});
}
quant::FloatRangeCounts CountsFrom(const double* v) {
  quant::FloatRangeCounts c;
  c.count = static_cast<int64_t>(v[0]);
  c.amax = v[1];
  c.nonfinite = static_cast<int64_t>(v[2]);
  c.nonzero = static_cast<int64_t>(v[3]);
  c.subnormal_min = static_cast<int64_t>(v[4]);
  c.subnormal_max = static_cast<int64_t>(v[5]);
  c.subnormal_known = v[6] != 0;
  return c;
}

// Range counts of the candidates' float outputs, and the first graph output of the base run.
class BaseObserver final : public runtime::Observer {
 public:
  BaseObserver(const std::vector<std::string>& watched, std::string output, size_t batches)
      : output_(std::move(output)), counts_(batches, std::vector<quant::FloatRangeCounts>(watched.size())),
        outputs_(batches) {
    for (size_t i = 0; i < watched.size(); ++i) index_[watched[i]] = i;
  }
  void set_batch(size_t b) { batch_ = b; }
  bool Wants(const std::string& n) const override { return n == output_ || index_.count(n) != 0; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& n, const ir::Node*, const runtime::TensorView& v) override {
    const float* p = v.data_as<float>();
    if (auto it = index_.find(n); it != index_.end()) counts_[batch_][it->second].Add(p, v.numel());
    if (n == output_) outputs_[batch_].assign(p, p + v.numel());
    return Status::Ok();
  }
  std::vector<double> Rows() const {
    std::vector<double> rows;
    for (const auto& batch : counts_) {
      for (const quant::FloatRangeCounts& c : batch) AppendCounts(c, &rows);
    }
    return rows;
  }
  const std::vector<std::vector<float>>& outputs() const { return outputs_; }

 private:
  std::string output_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::vector<quant::FloatRangeCounts>> counts_;
  std::vector<std::vector<float>> outputs_;
  size_t batch_ = 0;
};

// The first graph output of a trial against the base run's, per batch.
class CompareOutput final : public runtime::Observer {
 public:
  CompareOutput(std::string output, const std::vector<std::vector<float>>* base)
      : output_(std::move(output)), base_(base), per_batch_(base->size()) {}
  void set_batch(size_t b) { batch_ = b; }
  bool Wants(const std::string& n) const override { return n == output_; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& n, const ir::Node*, const runtime::TensorView& v) override {
    const std::vector<float>& ref = (*base_)[batch_];
    QK_RETURN_IF_NOT(static_cast<int64_t>(ref.size()) == v.numel(), StatusCode::kInternal,
                     "output '{}' changed size between the base run and a float16 trial", n);
    per_batch_[batch_] = ErrorStats();
    per_batch_[batch_].Add(v.data_as<float>(), ref.data(), v.numel());
    return Status::Ok();
  }
  std::vector<double> Rows() const {
    std::vector<double> rows;
    for (const ErrorStats& e : per_batch_) e.AppendState(&rows);
    return rows;
  }

 private:
  std::string output_;
  const std::vector<std::vector<float>>* base_;
  std::vector<ErrorStats> per_batch_;
  size_t batch_ = 0;
};

// Runs `node` (at `index` in stored order of `graph`) in `dtype`: Cast to it on its float inputs,
// back to float32 on its float outputs that are not graph outputs (those stay 16-bit: the
// evaluator widens a 16-bit output exactly).
Status RunNodeIn(ir::Graph& graph, size_t index, ir::DType dtype) {
  ir::Node* node = graph.nodes().at(index);
  for (size_t i = 0; i < node->num_inputs(); ++i) {
    ir::Value* in = node->input(i);
    if (!IsFloat(in)) continue;
    QK_ASSIGN_OR_RETURN(ir::Node * cast, graph.InsertNodeBefore(node, "Cast", {in}, {graph.UniqueValueName(in->name() + "_16")},
                                                                "", graph.UniqueNodeName(node->name + "_in16")));
    cast->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(dtype)));
    graph.SetNodeInput(node, i, cast->output(0));
  }
  for (size_t j = 0; j < node->num_outputs(); ++j) {
    ir::Value* out = node->output(j);
    if (!IsFloat(out) || out->is_graph_output()) continue;
    const std::vector<ir::Use> uses = out->uses();
    QK_ASSIGN_OR_RETURN(ir::Node * cast, graph.AddNode("Cast", {out}, {graph.UniqueValueName(out->name() + "_32")}, "",
                                                       graph.UniqueNodeName(node->name + "_out32")));
    cast->SetAttr(ir::Attribute::Int("to", static_cast<int64_t>(ir::DType::kFloat)));
    for (const ir::Use& use : uses) graph.SetNodeInput(use.node, static_cast<size_t>(use.input_index), cast->output(0));
  }
  return Status::Ok();
}

Result<ir::Model> TrialModel(const ir::Model& typed, const std::vector<size_t>& nodes, ir::DType dtype) {
  QK_ASSIGN_OR_RETURN(ir::Model m, ir::CloneModel(typed));
  QK_RETURN_IF_NOT(m.graph->num_nodes() == typed.graph->num_nodes(), StatusCode::kInternal,
                   "clone changed the node count");
  // Casts are appended or inserted before later nodes: stored indices of earlier nodes stay.
  std::vector<size_t> sorted = nodes;
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t index : sorted) QK_RETURN_IF_ERROR(RunNodeIn(*m.graph, index, dtype));
  return m;
}

// The worse of two range checks (not fitting beats fitting; then the smaller headroom).
bool Worse(const quant::FloatRangeCheck& a, const quant::FloatRangeCheck& b) {
  if (a.fits() != b.fits()) return !a.fits();
  if (b.verdict == quant::FloatRangeVerdict::kNoData) return a.verdict != quant::FloatRangeVerdict::kNoData;
  return a.headroom < b.headroom;
}

}  // namespace

Status CheckFloat16CheckOptions(const Float16CheckOptions& o) {
  QK_RETURN_IF_ERROR(quant::CheckFloatRangeOptions(o.range));
  QK_RETURN_IF_NOT(o.max_output_rel_mse >= 0 && std::isfinite(o.max_output_rel_mse), StatusCode::kInvalidArgument,
                   "float16 check: output error limit {} must be finite and >= 0", o.max_output_rel_mse);
  QK_RETURN_IF_NOT(o.max_metric_loss >= 0 && std::isfinite(o.max_metric_loss), StatusCode::kInvalidArgument,
                   "float16 check: metric loss limit {} must be finite and >= 0", o.max_metric_loss);
  return Status::Ok();
}

Result<Float16CheckResult> CheckFloat16Layers(const PlanEvaluator& evaluator, const ir::Model& model,
                                              const std::vector<Metric*>& metrics,
                                              const Float16CheckOptions& options) {
  QK_RETURN_IF_ERROR(CheckFloat16CheckOptions(options));
  const auto start = std::chrono::steady_clock::now();
  const ir::DType dtype = options.range.dtype;
  QK_ASSIGN_OR_RETURN(ir::Model typed, ir::CloneModel(model));
  QK_RETURN_IF_ERROR(ir::InferShapes(typed));
  const ir::Graph& graph = *typed.graph;
  QK_RETURN_IF_NOT(!graph.outputs().empty(), StatusCode::kInvalidArgument, "the model has no outputs");
  const std::string output = graph.outputs().front()->name();

  // Candidates, in stored order (the node order trial models keep).
  const std::vector<ir::Node*> nodes = graph.nodes();
  std::set<std::string> wanted(options.nodes.begin(), options.nodes.end());
  std::vector<Float16LayerRow> rows;
  std::vector<size_t> row_node;  // stored index per row
  std::vector<std::string> watched;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = *nodes[i];
    if (!wanted.empty()) {
      if (!wanted.erase(n.name)) continue;
    } else if (!n.domain().empty() || SkippedOps().count(n.op_type())) {
      continue;
    }
    Float16LayerRow row;
    row.node = n.name.empty() ? n.output(0) ? "<producing " + n.output(0)->name() + ">" : "?" : n.name;
    row.op_type = n.op_type();
    for (const ir::Value* out : n.outputs()) {
      if (IsFloat(out)) row.outputs.push_back(out->name());
    }
    if (row.outputs.empty()) {
      bool untyped = false;
      for (const ir::Value* out : n.outputs()) untyped |= out && out->type.dtype == ir::DType::kUndefined;
      if (!untyped && options.nodes.empty()) continue;  // computes no float: not a candidate
      row.reason = untyped ? "untyped outputs: not tried" : "no float output";
    } else {
      row.tried = true;
      watched.insert(watched.end(), row.outputs.begin(), row.outputs.end());
    }
    // The float constants it reads are stored in the 16-bit type too.
    for (const ir::Value* in : n.inputs()) {
      if (!in || !in->initializer || in->initializer->dtype() != ir::DType::kFloat) continue;
      const quant::FloatRangeCheck c = quant::CheckFloatRange(*in->initializer, options.range);
      if (Worse(c, row.range)) {
        row.range = c;
        row.range_tensor = in->name();
      }
    }
    rows.push_back(std::move(row));
    row_node.push_back(i);
  }
  QK_RETURN_IF_NOT(wanted.empty(), StatusCode::kInvalidArgument, "float16 check: no node named '{}' in {}",
                   *wanted.begin(), evaluator.options().model);
  QK_RETURN_IF_NOT(!rows.empty(), StatusCode::kInvalidArgument, "float16 check: {} has no float layer to check",
                   evaluator.options().model);

  Float16CheckResult result;
  // The base run: output values and the candidates' range counts.
  BaseObserver base(watched, output, evaluator.num_batches());
  QK_ASSIGN_OR_RETURN(ir::Model base_model, ir::CloneModel(typed));
  QK_ASSIGN_OR_RETURN(TrialResult base_trial, evaluator.EvaluateModel(std::move(base_model), metrics, [&](size_t b) {
                        base.set_batch(b);
                        return &base;
                      }));
  result.reference_metrics = base_trial.metrics;
  ++result.trials;
  QK_ASSIGN_OR_RETURN(std::vector<double> count_rows,
                      evaluator.GatherBatchRows(base.Rows(), watched.size() * kCountsSize, "combining float ranges"));
  std::unordered_map<std::string, quant::FloatRangeCounts> counts;
  for (size_t at = 0; at + kCountsSize <= count_rows.size(); at += kCountsSize) {
    const std::string& name = watched[(at / kCountsSize) % watched.size()];
    counts[name].Merge(CountsFrom(count_rows.data() + at));
  }
  for (Float16LayerRow& row : rows) {
    for (const std::string& out : row.outputs) {
      const quant::FloatRangeCheck c = quant::CheckFloatRange(counts[out], options.range);
      if (Worse(c, row.range)) {
        row.range = c;
        row.range_tensor = out;
      }
    }
  }

  // One trial per candidate, then all of them.
  auto run_trial = [&](const std::vector<size_t>& in16, ErrorSummary* error,
                       std::map<std::string, double>* trial_metrics) -> Status {
    QK_ASSIGN_OR_RETURN(ir::Model trial, TrialModel(typed, in16, dtype));
    CompareOutput compare(output, &base.outputs());
    QK_ASSIGN_OR_RETURN(TrialResult r, evaluator.EvaluateModel(std::move(trial), metrics, [&](size_t b) {
                          compare.set_batch(b);
                          return &compare;
                        }));
    QK_ASSIGN_OR_RETURN(std::vector<double> error_rows,
                        evaluator.GatherBatchRows(compare.Rows(), ErrorStats::kStateSize, "combining float16 errors"));
    ErrorStats total;
    for (size_t at = 0; at + ErrorStats::kStateSize <= error_rows.size(); at += ErrorStats::kStateSize) {
      total.Merge(ErrorStats::FromState(error_rows.data() + at));
    }
    *error = ErrorSummary::From(total);
    *trial_metrics = r.metrics;
    ++result.trials;
    return Status::Ok();
  };
  Progress progress("float16 check", static_cast<int64_t>(rows.size()) + 1, "trials");
  if (!options.progress) progress.set_enabled(false);
  std::vector<size_t> all;
  for (size_t r = 0; r < rows.size(); ++r) {
    Float16LayerRow& row = rows[r];
    if (row.tried) {
      QK_RETURN_IF_ERROR(run_trial({row_node[r]}, &row.isolated_output, &row.isolated_metrics));
      all.push_back(row_node[r]);
      for (Metric* m : metrics) {
        const auto it = row.isolated_metrics.find(m->name());
        const auto ref = result.reference_metrics.find(m->name());
        if (it != row.isolated_metrics.end() && ref != result.reference_metrics.end()) {
          row.worst_metric_loss = std::max(row.worst_metric_loss, m->Loss(it->second, ref->second));
        }
      }
    }
    progress.Advance(1);
  }
  if (!all.empty()) QK_RETURN_IF_ERROR(run_trial(all, &result.all_output, &result.all_metrics));
  progress.Advance(1);
  progress.Finish();

  for (Float16LayerRow& row : rows) {
    if (!row.range.fits() && row.range.verdict != quant::FloatRangeVerdict::kNoData) {
      row.pin = true;
      row.reason = fmt::format("'{}': {}", row.range_tensor, row.range.reason);
    } else if (row.tried && row.isolated_output.rel_mse > options.max_output_rel_mse) {
      row.pin = true;
      row.reason = fmt::format("output rel MSE {:.3e} > {:.3e} in {}", row.isolated_output.rel_mse,
                               options.max_output_rel_mse, ir::DTypeName(dtype));
    } else if (row.tried && row.worst_metric_loss > options.max_metric_loss) {
      row.pin = true;
      row.reason = fmt::format("metric loss {:.3f} > {:.3f} in {}", row.worst_metric_loss, options.max_metric_loss,
                               ir::DTypeName(dtype));
    }
  }
  for (const Float16LayerRow& row : rows) {
    if (row.pin) result.pin_to_fp32.push_back(row.node);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Float16LayerRow& a, const Float16LayerRow& b) {
    if (a.pin != b.pin) return a.pin;
    return a.isolated_output.rel_mse > b.isolated_output.rel_mse;
  });
  result.rows = std::move(rows);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace {

nlohmann::json Num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json ErrorJson(const ErrorSummary& e) {
  return {{"sqnr_db", Num(e.sqnr_db)}, {"cosine", Num(e.cosine)}, {"rel_mse", Num(e.rel_mse)}};
}

}  // namespace

std::string FormatFloat16CheckTable(const Float16CheckResult& r, size_t max_rows) {
  std::string s = fmt::format("all layers in 16 bits: output SQNR {:.2f} dB, rel MSE {:.3e} vs the model as given\n",
                              r.all_output.sqnr_db, r.all_output.rel_mse);
  for (const auto& [name, v] : r.reference_metrics) {
    const auto it = r.all_metrics.find(name);
    s += fmt::format("{}: as given {:.4f}, all 16-bit {:.4f}\n", name, v, it == r.all_metrics.end() ? NAN : it->second);
  }
  s += fmt::format("{:>4} {:<32} {:<18} {:>9} {:>10} {:>9} {:>10}  {}\n", "rank", "node", "op", "iso SQNR",
                   "iso relMSE", "headroom", "range", "FP32?");
  for (size_t i = 0; i < r.rows.size() && i < max_rows; ++i) {
    const Float16LayerRow& row = r.rows[i];
    s += fmt::format("{:>4} {:<32} {:<18} {:>9.2f} {:>10.3e} {:>9.3g} {:>10}  {}\n", i + 1, row.node, row.op_type,
                     row.isolated_output.sqnr_db, row.isolated_output.rel_mse, row.range.headroom,
                     quant::FloatRangeVerdictName(row.range.verdict), row.pin ? "pin: " + row.reason : row.reason);
  }
  if (r.rows.size() > max_rows) s += fmt::format("... {} more\n", r.rows.size() - max_rows);
  s += fmt::format("{} layers to keep in FP32; {} trials in {:.2f} s\n", r.pin_to_fp32.size(), r.trials, r.seconds);
  return s;
}

std::string Float16CheckJson(const Float16CheckResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Float16LayerRow& row : r.rows) {
    rows.push_back({{"node", row.node},
                    {"op_type", row.op_type},
                    {"outputs", row.outputs},
                    {"tried", row.tried},
                    {"pin_fp32", row.pin},
                    {"reason", row.reason},
                    {"isolated", {{"output", ErrorJson(row.isolated_output)}, {"metrics", row.isolated_metrics}}},
                    {"worst_metric_loss", row.worst_metric_loss},
                    {"range",
                     {{"tensor", row.range_tensor},
                      {"verdict", quant::FloatRangeVerdictName(row.range.verdict)},
                      {"amax", row.range.amax},
                      {"headroom", Num(row.range.headroom)},
                      {"subnormal_share", {row.range.subnormal_share_min, row.range.subnormal_share_max}},
                      {"nonfinite", row.range.nonfinite}}}});
  }
  nlohmann::json j{{"pin_fp32", r.pin_to_fp32},
                   {"all_16bit", {{"output", ErrorJson(r.all_output)}, {"metrics", r.all_metrics}}},
                   {"reference_metrics", r.reference_metrics},
                   {"trials", r.trials},
                   {"seconds", r.seconds},
                   {"rows", rows}};
  return j.dump(1) + "\n";
}

}  // namespace quantkit::analysis
