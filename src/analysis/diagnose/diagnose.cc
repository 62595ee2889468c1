#include "analysis/diagnose/diagnose.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <thread>

#include "analysis/collect_pass.h"
#include "analysis/diagnose/internal.h"
#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "data/npy.h"
#include "data/source.h"
#include "quant/collectors/per_channel.h"
#include "quant/method_amax.h"
#include "runtime/interpreter.h"

namespace quantkit::analysis {
namespace {

using namespace diagnose_internal;  // NOLINT: this file's own helpers

// Per-channel abs-max (axis 1) of every watched rank-4 (NCHW) tensor, for dead channels.
class ChannelObserver final : public runtime::Observer {
 public:
  explicit ChannelObserver(const CollectorMap* watched) : watched_(watched) {}
  bool Wants(const std::string& name) const override { return watched_->count(name) != 0; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& name, const ir::Node*, const runtime::TensorView& view) override {
    if (view.shape.size() != 4) return Status::Ok();  // NCHW feature maps only (not [B, T, D])
    auto it = channels_.try_emplace(name, quant::PerChannelAbsMaxCollector(1)).first;
    quant::TensorView v{quant::FloatSpan(view.data_as<float>(), static_cast<size_t>(view.numel())),
                        view.shape};
    return it->second.Observe(v).WithContext(fmt::format("tensor '{}'", name));
  }
  std::vector<float> AmaxOf(const std::string& name) const {
    auto it = channels_.find(name);
    return it == channels_.end() ? std::vector<float>{} : it->second.Finalize().amax;
  }

 private:
  const CollectorMap* watched_;
  std::map<std::string, quant::PerChannelAbsMaxCollector> channels_;
};

// Nodes whose result for one sample depends on the other samples of the batch.
std::vector<std::string> BatchMixingNodes(const ir::Graph& graph) {
  std::vector<std::string> reasons;
  for (const ir::Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (op == "BatchNormalization" && n->GetInt("training_mode", 0) != 0) {
      reasons.push_back(fmt::format("{}: BatchNormalization with training_mode=1 normalizes with "
                                    "the batch's own mean/variance", n->Describe()));
    } else if (op.rfind("Reduce", 0) == 0 && n->num_inputs() < 2) {
      const std::vector<int64_t> axes = n->GetInts("axes");
      const bool all = axes.empty() && n->GetInt("noop_with_empty_axes", 0) == 0;
      if (all || std::find(axes.begin(), axes.end(), 0) != axes.end()) {
        reasons.push_back(fmt::format("{}: {} reduces over the batch axis", n->Describe(), op));
      }
    } else if ((op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization") &&
               n->has_attr("axis") && n->GetInt("axis", -1) == 0) {
      reasons.push_back(fmt::format("{}: {} normalizes over axis 0 (the batch)", n->Describe(), op));
    }
  }
  return reasons;
}

// The commonest layout mistake fails before any statistics: a single .npy of NHWC images for an
// NCHW model (or the reverse). Says so instead of only "shape mismatch".
std::string LayoutHint(const std::string& spec, const std::vector<data::InputSpec>& inputs) {
  if (inputs.size() != 1 || spec.size() < 4 || spec.compare(spec.size() - 4, 4, ".npy") != 0) return "";
  auto t = data::ReadNpy(spec);
  const std::vector<int64_t>& want = inputs[0].dims;
  if (!t.ok() || t->rank() != 4 || want.size() != 4) return "";
  const std::vector<int64_t>& d = t->dims();
  auto same = [](int64_t model_dim, int64_t data_dim) { return model_dim < 0 || model_dim == data_dim; };
  if (same(want[1], d[3]) && same(want[2], d[1]) && same(want[3], d[2]) && d[3] <= 4) {
    return "the data looks NHWC (channels last) for an NCHW model: transpose it with (0, 3, 1, 2)";
  }
  if (same(want[3], d[1]) && same(want[1], d[2]) && same(want[2], d[3]) && d[1] <= 4) {
    return "the data looks NCHW (channels first) for an NHWC model: transpose it with (0, 2, 3, 1)";
  }
  return "";
}

Result<std::unique_ptr<data::Source>> Open(const std::string& spec, const ir::Model& model,
                                           int64_t samples) {
  const std::vector<data::InputSpec> inputs = data::ModelInputs(model);
  auto s = data::OpenSource(spec, inputs);
  if (!s.ok()) {
    const std::string hint = LayoutHint(spec, inputs);
    if (hint.empty()) return s.status();
    return Status(s.status().code(), fmt::format("{} ({}; layout_swapped)", s.status().message(), hint));
  }
  return data::Take(std::move(*s), samples);
}

// Flattened float outputs of a pass, in sample order. Only batch-first outputs compare across
// batch sizes: a recurrent state [layers, B, H] flattened run by run interleaves differently at
// batch 1 and batch B, which is no batch dependence.
struct OutputCapture {
  std::vector<std::vector<float>> values;  // per output
  std::vector<bool> not_batch_first;       // per output: seen with a leading dim != the batch
  Status Add(const std::vector<runtime::NamedTensor>& outs, int64_t batch) {
    values.resize(outs.size());
    not_batch_first.resize(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const ir::Tensor& t = outs[i].tensor;
      if (t.rank() == 0 || t.dims()[0] != batch) not_batch_first[i] = true;
      if (not_batch_first[i]) values[i].clear();
      if (t.dtype() != ir::DType::kFloat || not_batch_first[i]) continue;
      const float* p = outs[i].tensor.data_as<float>();
      values[i].insert(values[i].end(), p, p + outs[i].tensor.numel());
    }
    return Status::Ok();
  }
};

// Runs the first samples at batch 1 and at batch B; differences beyond rounding mean the
// activations depend on the batch composition.
Status MeasureBatchDependence(const DiagnoseOptions& o, const runtime::Interpreter& interp,
                              const ir::Model& model, const std::vector<std::string>& activations,
                              int64_t n, BatchCheck* check) {
  const int64_t m = std::min(n, o.batch_check_samples);
  const int64_t b = std::min(o.batch_size, m);
  if (m < 2 || b < 2) return Status::Ok();
  CollectorMap stats[2];
  OutputCapture outs[2];
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& a : activations) stats[pass].emplace(a, quant::TensorCollector());
    QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> src, Open(o.data, model, m));
    CollectingObserver obs(&stats[pass]);
    PassOptions p;
    p.batch_size = pass == 0 ? 1 : b;
    p.label = fmt::format("batch {}", p.batch_size);
    p.progress = o.progress;
    PassHooks hooks;
    int64_t batch = 0;
    hooks.before_run = [&batch](int64_t, const data::Batch& in) {
      batch = in.size;
      return Status::Ok();
    };
    hooks.after_run = [&outs, &batch, pass](int64_t, const std::vector<runtime::NamedTensor>& t) {
      return outs[pass].Add(t, batch);
    };
    QK_RETURN_IF_ERROR(RunPass(interp, *src, p, {&obs}, hooks));
  }
  check->measured = true;
  check->samples = m;
  check->batch = b;
  for (const std::string& a : activations) {
    const float a1 = stats[0][a].range().amax, ab = stats[1][a].range().amax;
    const double rel = std::fabs(a1 - ab) / std::max<double>(std::max(a1, ab), 1e-30);
    if (rel > check->max_rel_amax_diff) check->max_rel_amax_diff = rel, check->worst_tensor = a;
  }
  for (size_t i = 0; i < outs[0].values.size() && i < outs[1].values.size(); ++i) {
    const std::vector<float>& x = outs[0].values[i];
    const std::vector<float>& y = outs[1].values[i];
    if (outs[0].not_batch_first[i] || outs[1].not_batch_first[i] || x.size() != y.size() || x.empty()) continue;
    double diff = 0, scale = 1e-30;
    for (size_t k = 0; k < x.size(); ++k) {
      diff = std::max(diff, std::fabs(static_cast<double>(x[k]) - y[k]));
      scale = std::max(scale, std::fabs(static_cast<double>(y[k])));
    }
    check->max_output_diff = std::max(check->max_output_diff, diff / scale);
  }
  return Status::Ok();
}

void SampleOutliers(const std::vector<InputStats>& sets, const std::vector<InputStats>* base,
                    std::vector<SampleOutlier>* out) {
  for (size_t i = 0; i < sets.size(); ++i) {
    const InputStats& s = sets[i];
    const std::vector<double>& bm = base ? (*base)[i].sample_mean : s.sample_mean;
    const std::vector<double>& bs = base ? (*base)[i].sample_std : s.sample_std;
    const std::vector<double> zm = RobustZAgainst(s.sample_mean, bm), zs = RobustZAgainst(s.sample_std, bs);
    for (size_t k = 0; k < zm.size(); ++k) {
      if (std::fabs(zm[k]) > kSampleOutlierZ || std::fabs(zs[k]) > kSampleOutlierZ) {
        out->push_back({static_cast<int64_t>(k), s.input, zm[k], zs[k]});
      }
    }
  }
}

std::string Names(const std::vector<std::string>& v, size_t limit = 5) {  // "a, b (+3 more)"
  std::string s;
  for (size_t i = 0; i < v.size() && i < limit; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > limit) s += fmt::format(" (+{} more)", v.size() - limit);
  return s;
}

}  // namespace

Result<DiagnoseResult> Diagnose(const DiagnoseOptions& o) {
  QK_RETURN_IF_NOT(!o.data.empty(), StatusCode::kInvalidArgument, "give calibration data (--data)");
  QK_RETURN_IF_NOT(o.batch_size > 0, StatusCode::kInvalidArgument, "--batch-size must be positive, got {}",
                   o.batch_size);
  QK_RETURN_IF_NOT(o.chunks >= 1 && o.chunks <= 256, StatusCode::kInvalidArgument,
                   "--chunks must be in [1, 256], got {}", o.chunks);
  QK_RETURN_IF_NOT(o.bootstrap >= 0 && o.subsets >= 0, StatusCode::kInvalidArgument,
                   "--bootstrap and --subsets must not be negative");
  QK_RETURN_IF_NOT(o.ci_tolerance > 0 && o.cv_tolerance > 0, StatusCode::kInvalidArgument,
                   "--tolerance values must be positive");
  // -o is locked before the (long) analysis, so that a concurrent run into the same directory
  // fails at once; the reports and pictures then land together or not at all.
  std::unique_ptr<ArtifactSet> out;
  if (!o.output_dir.empty()) {
    QK_ASSIGN_OR_RETURN(out, ArtifactSet::Open(o.output_dir, {"report.txt", "report.json"}));
  }
  const auto start_time = std::chrono::steady_clock::now();
  DiagnoseResult r;
  r.model = o.model;
  r.method = quant::MethodLabel(o.method);
  r.chosen = o.method;
  QK_ASSIGN_OR_RETURN(ir::Model loaded, LoadModelForQuantization(o.model));
  auto model = std::make_shared<const ir::Model>(std::move(loaded));
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites, passes::FindQdqSites(*model->graph, o.placement));
  const std::vector<std::string> activations = passes::ActivationTensors(sites);
  r.batch.graph_reasons = BatchMixingNodes(*model->graph);
  QK_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Interpreter> interp, runtime::Interpreter::Create(model));

  // 1. Calibration pass: one collector set per chunk, model-input statistics per sample.
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, Open(o.data, *model, o.samples));
  r.data = source->Describe();
  const int64_t n = source->num_samples();
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: no samples", r.data);
  r.samples = n;
  const int64_t k = (n + std::min<int64_t>(o.chunks, n) - 1) / std::min<int64_t>(o.chunks, n);
  const int chunks = static_cast<int>((n + k - 1) / k);
  r.chunk_size = k;
  std::vector<CollectorMap> chunk_stats(static_cast<size_t>(chunks));
  for (CollectorMap& c : chunk_stats) {
    for (const std::string& a : activations) c.emplace(a, quant::TensorCollector());
  }
  CollectingObserver observer(&chunk_stats[0]);
  ChannelObserver channels(&chunk_stats[0]);
  std::map<std::string, InputStatsAccumulator> input_acc;
  // Per-sample input checks read [batch, ...] tensors: a recurrent state (batch on axis 1) or an
  // unbatched scalar is no sample stream to check.
  std::set<std::string> batch_first;
  for (const data::InputSpec& spec : data::ModelInputs(*model)) {
    if (spec.batch_axis == 0) batch_first.insert(spec.name);
  }
  auto input_hook = [batch_first](std::map<std::string, InputStatsAccumulator>* acc, const data::Batch& batch) {
    for (const auto& [name, tensor] : batch.inputs) {
      if (!batch_first.count(name)) continue;
      QK_RETURN_IF_ERROR(acc->try_emplace(name, name).first->second.Add(tensor));
    }
    return Status::Ok();
  };
  PassOptions pass;
  pass.batch_size = o.batch_size;
  pass.chunk_size = k;
  pass.label = "diagnose";
  pass.progress = o.progress;
  PassHooks hooks;
  hooks.before_run = [&](int64_t start, const data::Batch& batch) {
    observer.set_target(&chunk_stats[static_cast<size_t>(start / k)]);
    return input_hook(&input_acc, batch);
  };
  QK_RETURN_IF_ERROR(RunPass(*interp, *source, pass, {&observer, &channels}, hooks));
  for (const auto& [name, acc] : input_acc) r.inputs.push_back(acc.Finalize());

  // 2. Per-tensor analysis from the chunks.
  const Resampling resampling = MakeResampling(chunks, o.bootstrap, o.subsets, o.seed);
  std::vector<int64_t> chunk_end;
  for (int i = 0; i < chunks; ++i) chunk_end.push_back(std::min<int64_t>(n, (i + 1) * k));
  // Tensors are independent and the chunk collectors are only read: analyse them in parallel
  // (the histogram methods over the resamples dominate diagnose's run time).
  std::map<std::string, quant::TensorCollector> full;
  for (const std::string& a : activations) full.emplace(a, quant::TensorCollector());
  std::vector<Result<TensorDiagnosis>> analysed(activations.size(), Status(StatusCode::kInternal, "not run"));
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < activations.size(); i = next++) {
      const std::string& a = activations[i];
      std::vector<const quant::TensorCollector*> parts;
      for (const CollectorMap& c : chunk_stats) parts.push_back(&c.at(a));
      analysed[i] = AnalyzeTensor(a, parts, chunk_end, resampling, o.method, channels.AmaxOf(a), &full.at(a));
    }
  };
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < std::min(threads, activations.size()); ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (Result<TensorDiagnosis>& t : analysed) {
    if (!t.ok()) return t.status();
    r.tensors.push_back(std::move(*t));
  }
  chunk_stats.clear();

  // 3. Batch-size dependence, measured.
  if (o.batch_check_samples > 0) {
    QK_RETURN_IF_ERROR(MeasureBatchDependence(o, *interp, *model, activations, n, &r.batch));
  }

  // 4. Reference data: clipping and divergence per tensor, input statistics.
  if (!o.reference_data.empty()) {
    QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> ref, Open(o.reference_data, *model, o.reference_samples));
    r.reference = ref->Describe();
    r.reference_samples = ref->num_samples();
    CollectorMap ref_stats;
    for (const std::string& a : activations) ref_stats.emplace(a, quant::TensorCollector());
    CollectingObserver ref_observer(&ref_stats);
    std::map<std::string, InputStatsAccumulator> ref_acc;
    PassOptions rp = pass;
    rp.chunk_size = 0;
    rp.label = "reference";
    PassHooks rh;
    rh.before_run = [&](int64_t, const data::Batch& batch) { return input_hook(&ref_acc, batch); };
    QK_RETURN_IF_ERROR(RunPass(*interp, *ref, rp, {&ref_observer}, rh));
    for (const auto& [name, acc] : ref_acc) r.reference_inputs.push_back(acc.Finalize());
    for (TensorDiagnosis& t : r.tensors) {
      const quant::TensorCollector& c = ref_stats.at(t.name);
      const quant::TensorCollector& f = full.at(t.name);
      t.ref_amax = c.range().amax;
      t.ref_clip_share = t.amax > 0 ? ShareAbove(c.histogram(), t.amax) : 0.0;
      t.ref_js_bits = JensenShannonBits(f.histogram(), f.range().amax, c.histogram(), c.range().amax);
    }
  }

  // 5. Findings.
  std::vector<Finding>& F = r.findings;
  r.worst_ci_rel = 0;
  for (const TensorDiagnosis& t : r.tensors) {
    if (t.amax <= 0) continue;
    r.worst_ci_rel = std::max(r.worst_ci_rel, t.ci_rel);
    if (t.ci_rel > o.ci_tolerance) r.moving.push_back(t.name);
    auto cv = t.cv.find(r.chosen);
    if (cv != t.cv.end() && cv->second > o.cv_tolerance) r.unstable.push_back(t.name);
  }
  r.enough = r.moving.empty();
  {
    const double ratio = std::isfinite(r.worst_ci_rel) ? r.worst_ci_rel / o.ci_tolerance : 4.0;
    // The interval narrows like 1/sqrt(N): N' = N (width / tolerance)^2, rounded up to 32.
    const double want = static_cast<double>(n) * ratio * ratio;
    r.suggested_samples = std::max<int64_t>(k, (static_cast<int64_t>(std::ceil(want)) + 31) / 32 * 32);
    if (!r.enough) r.suggested_samples = std::max(r.suggested_samples, 2 * n);
  }
  auto moving_detail = [&]() {
    std::vector<const TensorDiagnosis*> v;
    for (const TensorDiagnosis& t : r.tensors) {
      if (t.amax > 0 && t.ci_rel > o.ci_tolerance) v.push_back(&t);
    }
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->ci_rel > b->ci_rel; });
    std::vector<std::string> s;
    for (auto* t : v) s.push_back(fmt::format("{} (+-{:.1f}%)", t->name, 100.0 * t->ci_rel));
    return Names(s);
  };
  if (r.enough) {
    F.push_back({"samples_enough", "info", "data",
                 fmt::format("{} samples enough: every quantized tensor's {} scale 95% interval is "
                             "within +-{:.1f}% (worst +-{:.2f}%); about {} would do",
                             n, r.method, 100.0 * o.ci_tolerance, 100.0 * r.worst_ci_rel,
                             std::min(n, r.suggested_samples))});
  } else {
    F.push_back({"too_few_samples", "warning", "data",
                 fmt::format("add samples: with {} samples these tensors' {} scale still moves beyond "
                             "+-{:.1f}% (95% interval): {}; suggested N >= {}",
                             n, r.method, 100.0 * o.ci_tolerance, moving_detail(), r.suggested_samples)});
  }
  if (!r.unstable.empty()) {
    F.push_back({"unstable_scale", "warning", "data",
                 fmt::format("{} scales change by more than {:.1f}% (coefficient of variation) between "
                             "halves of the data: {}",
                             r.method, 100.0 * o.cv_tolerance, Names(r.unstable))});
  }
  if (o.method.method != quant::CalibMethod::kEntropy) {
    std::vector<std::string> ent;
    for (const TensorDiagnosis& t : r.tensors) {
      auto it = t.cv.find(quant::DefaultRequest(quant::CalibMethod::kEntropy));
      if (it != t.cv.end() && it->second > o.cv_tolerance) ent.push_back(t.name);
    }
    if (!ent.empty()) {
      F.push_back({"entropy_unstable", "info", "data",
                   fmt::format("entropy calibration would be unstable on: {}", Names(ent))});
    }
  }
  for (const TensorDiagnosis& t : r.tensors) TensorFindings(t, o.method, &F);

  if (!r.batch.graph_reasons.empty()) {
    F.push_back({"batch_dependent_graph", "warning", "model",
                 fmt::format("activations depend on the batch composition: {}; export the model in "
                             "eval mode", Names(r.batch.graph_reasons, 3))});
  }
  if (r.batch.measured && (r.batch.max_rel_amax_diff > kBatchTolerance || r.batch.max_output_diff > kBatchTolerance)) {
    F.push_back({"batch_dependent", "error", "model",
                 fmt::format("statistics differ between batch 1 and batch {} on the same {} samples: "
                             "amax of '{}' by {:.3g}%, outputs by {:.3g}% of their range",
                             r.batch.batch, r.batch.samples, r.batch.worst_tensor,
                             100.0 * r.batch.max_rel_amax_diff, 100.0 * r.batch.max_output_diff)});
  }

  // Inputs: each set alone, calibration vs reference vs expectation, outlier samples.
  for (const InputStats& s : r.inputs) {
    CheckInputSet(s, "calibration", &F);
    if (!o.expect.empty()) CheckExpectation(s, "calibration", o.expect, &F);
  }
  for (const InputStats& s : r.reference_inputs) {
    CheckInputSet(s, "reference", &F);
    if (!o.expect.empty()) CheckExpectation(s, "reference", o.expect, &F);
    for (const InputStats& c : r.inputs) {
      if (c.input == s.input) CompareInputSets(c, "calibration", s, "reference", &F);
    }
  }
  SampleOutliers(r.inputs, nullptr, &r.outliers);
  if (!r.outliers.empty()) {
    std::string idx;
    for (size_t i = 0; i < r.outliers.size() && i < 10; ++i) idx += fmt::format("{}{}", i ? ", " : "", r.outliers[i].index);
    F.push_back({"outlier_samples", "warning", "data",
                 fmt::format("{} calibration samples have input statistics far from the rest (robust "
                             "z > {}): {}{}", r.outliers.size(), kSampleOutlierZ, idx,
                             r.outliers.size() > 10 ? ", ..." : "")});
  }
  if (!r.reference_inputs.empty() && r.reference_inputs.size() == r.inputs.size()) {
    SampleOutliers(r.reference_inputs, &r.inputs, &r.reference_outliers);
    if (!r.reference_outliers.empty()) {
      const double share = static_cast<double>(r.reference_outliers.size()) /
                           static_cast<double>(std::max<int64_t>(r.reference_samples, 1));
      std::string idx;
      for (size_t i = 0; i < r.reference_outliers.size() && i < 10; ++i) {
        idx += fmt::format("{}{}", i ? ", " : "", r.reference_outliers[i].index);
      }
      F.push_back({"reference_outlier_samples", share > 0.01 ? "warning" : "info", "data",
                   fmt::format("{} reference samples lie outside the calibration set's input "
                               "statistics (robust z > {}): {}{}",
                               r.reference_outliers.size(), kSampleOutlierZ, idx,
                               r.reference_outliers.size() > 10 ? ", ..." : "")});
    }
  }
  if (!o.reference_data.empty()) {
    std::vector<const TensorDiagnosis*> clip, shift;
    const double clip_limit = std::max(kReferenceClipShare, 2.0 / static_cast<double>(n + 1));
    for (const TensorDiagnosis& t : r.tensors) {
      if (t.ref_clip_share - t.clip_share > clip_limit) clip.push_back(&t);
      if (t.ref_js_bits > kShiftJsBits) shift.push_back(&t);
    }
    std::sort(clip.begin(), clip.end(), [](auto* a, auto* b) { return a->ref_clip_share > b->ref_clip_share; });
    std::sort(shift.begin(), shift.end(), [](auto* a, auto* b) { return a->ref_js_bits > b->ref_js_bits; });
    if (!clip.empty()) {
      std::vector<std::string> s;
      for (auto* t : clip) s.push_back(fmt::format("{} ({:.2f}% beyond {:.4g})", t->name, 100 * t->ref_clip_share, t->amax));
      F.push_back({"reference_clipping", "warning", clip.front()->name,
                   fmt::format("the reference data would be clipped by the calibrated scales (beyond what "
                               "calibration itself clips, > {:.2f}%): {}", 100.0 * clip_limit, Names(s))});
    }
    if (!shift.empty()) {
      std::vector<std::string> s;
      for (auto* t : shift) s.push_back(fmt::format("{} (JS {:.3f} bits)", t->name, t->ref_js_bits));
      F.push_back({"distribution_shift", "warning", shift.front()->name,
                   fmt::format("activation distributions differ between calibration and reference "
                               "data: {}", Names(s))});
    }
  }
  r.clean = std::none_of(F.begin(), F.end(), [](const Finding& f) { return f.severity != "info"; });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  r.summary = DiagnoseText(r);

  if (out) {
    QK_ASSIGN_OR_RETURN(r.written, WriteDiagnoseSvgs(r, *out));
    QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("report.txt"), r.summary));
    // report.json lists every file of the set, itself included.
    r.written.push_back(out->Target("report.txt"));
    r.written.push_back(out->Target("report.json"));
    QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("report.json"), DiagnoseJson(r)));
    QK_RETURN_IF_ERROR(out->Commit().status());
  }
  return r;
}

}  // namespace quantkit::analysis
