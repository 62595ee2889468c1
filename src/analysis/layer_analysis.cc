#include "analysis/layer_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "analysis/model_loading.h"
#include "analysis/report_json.h"
#include "common/check.h"
#include "common/progress.h"
#include "quant/params.h"

namespace quantkit::analysis {
namespace {

constexpr quant::QuantRange kInt8{-128, 127};

// Fake-quantizes x (per tensor) and accumulates the error against ref; counts clipped values.
// Kept per batch and combined in batch order (PlanEvaluator::GatherBatchRows), so the result is
// the same bits in one process and in N.
struct FakeQuantStats {
  ErrorStats error;
  int64_t clipped = 0, total = 0;
  double max_abs = 0;

  static constexpr size_t kStateSize = ErrorStats::kStateSize + 3;
  void AppendState(std::vector<double>* out) const {
    error.AppendState(out);
    out->insert(out->end(), {static_cast<double>(clipped), static_cast<double>(total), max_abs});
  }
  // The batch rows of AppendState added in order.
  static FakeQuantStats Combine(const std::vector<double>& rows) {
    FakeQuantStats s;
    for (size_t at = 0; at + kStateSize <= rows.size(); at += kStateSize) {
      const double* v = rows.data() + at;
      s.error.Merge(ErrorStats::FromState(v));
      s.clipped += static_cast<int64_t>(v[ErrorStats::kStateSize]);
      s.total += static_cast<int64_t>(v[ErrorStats::kStateSize + 1]);
      s.max_abs = std::max(s.max_abs, v[ErrorStats::kStateSize + 2]);
    }
    return s;
  }

  void Add(const float* x, const float* ref, int64_t n, float scale, std::vector<float>* scratch) {
    scratch->resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float r = std::nearbyint(x[i] / scale);
      clipped += (r > kInt8.max || r < kInt8.min) ? 1 : 0;
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(x[i])));
      (*scratch)[i] = quant::Dequantize(quant::QuantizeValue(x[i], scale, 0, kInt8), scale, 0);
    }
    total += n;
    error.Add(scratch->data(), ref, n);
  }
};

// Copies the FP32 values of the watched activations, per batch.
class CaptureObserver final : public runtime::Observer {
 public:
  CaptureObserver(const std::set<std::string>* names,
                  std::map<std::string, std::vector<float>>* out)
      : names_(names), out_(out) {}
  bool Wants(const std::string& n) const override { return names_->count(n) != 0; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& n, const ir::Node*, const runtime::TensorView& v) override {
    const float* p = v.data_as<float>();
    (*out_)[n].assign(p, p + v.numel());
    return Status::Ok();
  }

 private:
  const std::set<std::string>* names_;
  std::map<std::string, std::vector<float>>* out_;
};

// Watches one tensor of a simulated run and compares fq(value) with its FP32 value, per batch.
class CompareObserver final : public runtime::Observer {
 public:
  CompareObserver(std::string name, float scale,
                  const std::vector<std::map<std::string, std::vector<float>>>* fp32)
      : name_(std::move(name)), scale_(scale), fp32_(fp32), per_batch_(fp32->size()) {}
  void set_batch(size_t b) { batch_ = b; }
  std::vector<double> Rows() const {
    std::vector<double> rows;
    for (const FakeQuantStats& s : per_batch_) s.AppendState(&rows);
    return rows;
  }
  bool Wants(const std::string& n) const override { return n == name_; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& n, const ir::Node*, const runtime::TensorView& v) override {
    const std::vector<float>& ref = (*fp32_)[batch_].at(n);
    QK_RETURN_IF_NOT(static_cast<int64_t>(ref.size()) == v.numel(), StatusCode::kInternal,
                     "tensor '{}' changed size between the FP32 and the simulated run", n);
    per_batch_[batch_].Add(v.data_as<float>(), ref.data(), v.numel(), scale_, &scratch_);
    return Status::Ok();
  }

 private:
  std::string name_;
  float scale_;
  const std::vector<std::map<std::string, std::vector<float>>>* fp32_;
  std::vector<FakeQuantStats> per_batch_;
  size_t batch_ = 0;
  std::vector<float> scratch_;
};

// Only the tensors in `keep` stay quantized.
quant::QuantPlan Restrict(const quant::QuantPlan& plan, const std::set<std::string>& keep) {
  quant::QuantPlan p = plan;
  for (auto& [name, t] : p.tensors) {
    if (t.quantized && !keep.count(name)) {
      t.quantized = false;
      t.reason = "analysis: kept in float for this trial";
    }
  }
  return p;
}

// Weight error of per-channel fake quantization (from the initializer, no run needed).
Status WeightStats(const ir::Tensor& w, const quant::TensorQuant& t, LayerRow* row) {
  QK_RETURN_IF_NOT(w.dtype() == ir::DType::kFloat, StatusCode::kUnsupported,
                   "weight '{}' is not float", t.tensor);
  const int64_t channels = static_cast<int64_t>(t.scale.size());
  int64_t inner = 1, dim = 1;
  if (channels > 1) {
    const int64_t a = t.axis < 0 ? t.axis + w.rank() : t.axis;
    QK_RETURN_IF_NOT(a >= 0 && a < w.rank() && w.dims()[a] == channels,
                     StatusCode::kInvalidArgument, "weight '{}': {} scales do not match axis {}",
                     t.tensor, channels, t.axis);
    dim = w.dims()[a];
    for (int64_t i = a + 1; i < w.rank(); ++i) inner *= w.dims()[i];
  }
  const float* x = w.data_as<float>();
  std::vector<float> fq(static_cast<size_t>(w.numel()));
  int64_t clipped = 0;
  double used = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = channels > 1 ? (i / inner) % dim : 0;
    const float s = t.scale[c];
    const float r = std::nearbyint(x[i] / s);
    clipped += (r > kInt8.max || r < kInt8.min) ? 1 : 0;
    used = std::max(used, std::fabs(x[i]) / (static_cast<double>(s) * 127.0));
    fq[i] = quant::Dequantize(quant::QuantizeValue(x[i], s, 0, kInt8), s, 0);
  }
  ErrorStats e;
  e.Add(fq.data(), x, w.numel());
  row->isolated_tensor = row->accumulated_tensor = ErrorSummary::From(e);
  row->saturation = w.numel() ? static_cast<double>(clipped) / w.numel() : 0;
  row->range_used = used;
  return Status::Ok();
}

}  // namespace

Result<AnalyzeResult> AnalyzeLayers(const PlanEvaluator& evaluator, const quant::QuantPlan& plan,
                                    const std::vector<Metric*>& metrics,
                                    const AnalyzeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  AnalyzeResult result;
  result.samples = evaluator.num_samples();
  result.fp32_seconds = evaluator.fp32_seconds();
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(evaluator.options().model));
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites,
                      passes::PlanSites(*model.graph, plan, evaluator.options().simulation));
  quant::QuantPlan full = plan;
  QK_RETURN_IF_ERROR(passes::AddWeightScales(*model.graph, sites, &full));

  // Quantized tensors in topological order of their first quantized consumer.
  std::vector<LayerRow> rows;
  std::unordered_map<std::string, size_t> index;
  for (const passes::QdqSite& s : sites) {
    const quant::TensorQuant* t = full.Find(s.tensor);
    if (!t || !t->quantized) continue;
    // Rows cover the main graph: a body tensor has one value per iteration or none at all (a
    // branch not taken). Bodies stay quantized in every trial's plan.
    if (s.consumer->owner() != model.graph.get()) continue;
    auto [it, fresh] = index.emplace(s.tensor, rows.size());
    if (fresh) {
      LayerRow row;
      row.order = static_cast<int>(rows.size());
      row.tensor = s.tensor;
      row.role = quant::TensorRoleName(t->role);
      row.amax = t->amax.empty() ? 0 : *std::max_element(t->amax.begin(), t->amax.end());
      rows.push_back(std::move(row));
    }
    std::vector<std::string>& nodes = rows[it->second].nodes;
    if (std::find(nodes.begin(), nodes.end(), s.consumer->name) == nodes.end()) {
      nodes.push_back(s.consumer->name);
    }
  }
  QK_RETURN_IF_NOT(!rows.empty(), StatusCode::kInvalidArgument,
                   "the plan quantizes no tensor of {} (names must match the model)",
                   evaluator.options().model);

  // FP32 activations of the quantized activation tensors, per batch (kept in memory: use a
  // modest --samples on big models).
  std::set<std::string> activations;
  for (const LayerRow& r : rows) {
    if (full.Find(r.tensor)->role == quant::TensorRole::kActivation) activations.insert(r.tensor);
  }
  std::vector<std::map<std::string, std::vector<float>>> fp32(evaluator.num_batches());
  std::vector<std::unique_ptr<CaptureObserver>> capture;
  for (auto& m : fp32) capture.push_back(std::make_unique<CaptureObserver>(&activations, &m));
  QK_RETURN_IF_ERROR(evaluator.RunFp32([&](size_t b) { return capture[b].get(); }));

  QK_ASSIGN_OR_RETURN(TrialResult fp32_trial, evaluator.EvaluateFp32(metrics));
  result.fp32_metrics = fp32_trial.metrics;
  QK_ASSIGN_OR_RETURN(TrialResult int8, evaluator.EvaluatePlan(full, metrics));
  result.int8_metrics = int8.metrics;
  result.int8_output = ErrorSummary::From(int8.output);
  result.trials = 1;

  Progress progress("analyze", static_cast<int64_t>(rows.size()), "tensors");
  if (!options.progress) progress.set_enabled(false);
  std::set<std::string> prefix;
  for (LayerRow& row : rows) {
    const quant::TensorQuant& t = *full.Find(row.tensor);
    prefix.insert(row.tensor);
    const bool weight = t.role == quant::TensorRole::kWeight;
    if (weight) {
      const ir::Value* v = model.graph->FindValue(row.tensor);
      QK_RETURN_IF_NOT(v && v->initializer, StatusCode::kInternal, "weight '{}' has no initializer",
                       row.tensor);
      QK_RETURN_IF_ERROR(WeightStats(*v->initializer, t, &row));
    } else {
      std::vector<double> rows;
      std::vector<float> scratch;
      for (const auto& batch : fp32) {
        const std::vector<float>& x = batch.at(row.tensor);
        FakeQuantStats b;
        b.Add(x.data(), x.data(), static_cast<int64_t>(x.size()), t.scale[0], &scratch);
        b.AppendState(&rows);
      }
      QK_ASSIGN_OR_RETURN(rows,
                          evaluator.GatherBatchRows(std::move(rows), FakeQuantStats::kStateSize,
                                                    "combining tensor statistics"));
      const FakeQuantStats s = FakeQuantStats::Combine(rows);
      row.isolated_tensor = ErrorSummary::From(s.error);
      row.saturation = s.total ? static_cast<double>(s.clipped) / s.total : 0;
      row.range_used = s.max_abs / (static_cast<double>(t.scale[0]) * 127.0);
    }
    QK_ASSIGN_OR_RETURN(TrialResult iso,
                        evaluator.EvaluatePlan(Restrict(full, {row.tensor}), metrics));
    row.isolated_output = ErrorSummary::From(iso.output);
    row.isolated_metrics = iso.metrics;
    ++result.trials;
    if (options.accumulated) {
      CompareObserver compare(row.tensor, weight ? 1.0f : t.scale[0], &fp32);
      QK_ASSIGN_OR_RETURN(TrialResult acc,
                          evaluator.EvaluatePlan(Restrict(full, prefix), metrics,
                                                 [&](size_t b) -> runtime::Observer* {
                                                   if (weight) return nullptr;
                                                   compare.set_batch(b);
                                                   return &compare;
                                                 }));
      row.accumulated_output = ErrorSummary::From(acc.output);
      row.accumulated_metrics = acc.metrics;
      if (!weight) {
        QK_ASSIGN_OR_RETURN(std::vector<double> rows,
                            evaluator.GatherBatchRows(compare.Rows(), FakeQuantStats::kStateSize,
                                                      "combining tensor errors"));
        row.accumulated_tensor = ErrorSummary::From(FakeQuantStats::Combine(rows).error);
      }
      ++result.trials;
    }
    progress.Advance(1);
  }
  progress.Finish();
  std::stable_sort(rows.begin(), rows.end(), [](const LayerRow& a, const LayerRow& b) {
    return a.isolated_output.rel_mse > b.isolated_output.rel_mse;
  });
  result.rows = std::move(rows);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

using report::ErrorJson;
using report::Join;
using report::Num;

std::string FormatAnalyzeTable(const AnalyzeResult& r, size_t max_rows) {
  std::string s =
      fmt::format("{} samples; whole plan: output SQNR {:.2f} dB, cosine {:.6f}, rel MSE {:.3e}\n",
                  r.samples, r.int8_output.sqnr_db, r.int8_output.cosine, r.int8_output.rel_mse);
  for (const auto& [name, v] : r.fp32_metrics) {
    s += fmt::format("{}: FP32 {:.4f}, INT8 {:.4f}\n", name, v, r.int8_metrics.at(name));
  }
  s += fmt::format("{:>4} {:<28} {:<6} {:>9} {:>9} {:>10} {:>9} {:>10} {:>7} {:>6}  {}\n", "rank",
                   "tensor", "role", "iso SQNR", "iso out", "iso relMSE", "acc out", "acc relMSE",
                   "sat%", "range", "nodes");
  for (size_t i = 0; i < r.rows.size() && i < max_rows; ++i) {
    const LayerRow& row = r.rows[i];
    std::string extra;
    for (const auto& [name, v] : row.isolated_metrics) extra += fmt::format(" {}={:.4f}", name, v);
    s += fmt::format(
        "{:>4} {:<28} {:<6} {:>9.2f} {:>9.2f} {:>10.3e} {:>9.2f} {:>10.3e} {:>7.3f} {:>6.2f}  {}{}\n",
        i + 1, row.tensor, row.role == "activation" ? "act" : row.role, row.isolated_tensor.sqnr_db,
        row.isolated_output.sqnr_db, row.isolated_output.rel_mse, row.accumulated_output.sqnr_db,
        row.accumulated_output.rel_mse, 100.0 * row.saturation, row.range_used, Join(row.nodes),
        extra);
  }
  if (r.rows.size() > max_rows)
    s += fmt::format("... {} more (--top 0 or --json for all)\n", r.rows.size() - max_rows);
  s += fmt::format("{} trials in {:.2f} s (one FP32 pass: {:.3f} s)\n", r.trials, r.seconds,
                   r.fp32_seconds);
  return s;
}

std::string AnalyzeJson(const AnalyzeResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const LayerRow& row = r.rows[i];
    rows.push_back({{"rank", i + 1},
                    {"order", row.order},
                    {"tensor", row.tensor},
                    {"role", row.role},
                    {"nodes", row.nodes},
                    {"amax", row.amax},
                    {"isolated",
                     {{"tensor", ErrorJson(row.isolated_tensor)},
                      {"output", ErrorJson(row.isolated_output)},
                      {"metrics", row.isolated_metrics}}},
                    {"accumulated",
                     {{"tensor", ErrorJson(row.accumulated_tensor)},
                      {"output", ErrorJson(row.accumulated_output)},
                      {"metrics", row.accumulated_metrics}}},
                    {"saturation", row.saturation},
                    {"range_used", row.range_used}});
  }
  nlohmann::json j{{"samples", r.samples},
                   {"trials", r.trials},
                   {"seconds", r.seconds},
                   {"fp32_seconds", r.fp32_seconds},
                   {"fp32_metrics", r.fp32_metrics},
                   {"int8_metrics", r.int8_metrics},
                   {"int8_output", ErrorJson(r.int8_output)},
                   {"tensors", rows}};
  return j.dump(1);
}

}  // namespace quantkit::analysis
