#include "pipelines/diagnose/diagnose.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <thread>

#include "analysis/collect_pass.h"
#include "analysis/model_loading.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "data/npy.h"
#include "data/shard.h"
#include "data/source.h"
#include "pipelines/diagnose/collection.h"
#include "pipelines/diagnose/internal.h"
#include "quant/collectors/per_channel.h"
#include "quant/method_amax.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

// The measurement layer's statistics pass (analysis/collect_pass.h) and model loading.
using analysis::CalibrationRunBatch;
using analysis::CollectingObserver;
using analysis::CollectorMap;
using analysis::LoadModelForQuantization;
using analysis::PassHooks;
using analysis::PassOptions;
using analysis::ReadRuns;
using analysis::ReadSize;
using analysis::RunBatches;
using analysis::RunPass;

using namespace diagnose_internal;  // NOLINT: this file's own helpers

// Per-channel abs-max (axis 1) of every watched rank-4 (NCHW) tensor, for dead channels.
class ChannelObserver final : public runtime::Observer {
 public:
  using Channels = std::map<std::string, quant::PerChannelAbsMaxCollector>;
  ChannelObserver(const CollectorMap* watched, Channels* channels)
      : watched_(watched), channels_(channels) {}
  bool Wants(const std::string& name) const override { return watched_->count(name) != 0; }
  bool WantsFloat() const override { return true; }
  Status OnTensor(const std::string& name, const ir::Node*,
                  const runtime::TensorView& view) override {
    if (view.shape.size() != 4) return Status::Ok();  // NCHW feature maps only (not [B, T, D])
    auto it = channels_->try_emplace(name, quant::PerChannelAbsMaxCollector(1)).first;
    quant::TensorView v{quant::FloatSpan(view.data_as<float>(), static_cast<size_t>(view.numel())),
                        view.shape};
    return it->second.Observe(v).WithContext(fmt::format("tensor '{}'", name));
  }

 private:
  const CollectorMap* watched_;
  Channels* channels_;
};

// Nodes whose result for one sample depends on the other samples of the batch.
std::vector<std::string> BatchMixingNodes(const ir::Graph& graph) {
  std::vector<std::string> reasons;
  for (const ir::Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (op == "BatchNormalization" && n->GetInt("training_mode", 0) != 0) {
      reasons.push_back(
          fmt::format("{}: BatchNormalization with training_mode=1 normalizes with "
                      "the batch's own mean/variance",
                      n->Describe()));
    } else if (op.rfind("Reduce", 0) == 0 && n->num_inputs() < 2) {
      const std::vector<int64_t> axes = n->GetInts("axes");
      const bool all = axes.empty() && n->GetInt("noop_with_empty_axes", 0) == 0;
      if (all || std::find(axes.begin(), axes.end(), 0) != axes.end()) {
        reasons.push_back(fmt::format("{}: {} reduces over the batch axis", n->Describe(), op));
      }
    } else if ((op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization") &&
               n->has_attr("axis") && n->GetInt("axis", -1) == 0) {
      reasons.push_back(
          fmt::format("{}: {} normalizes over axis 0 (the batch)", n->Describe(), op));
    }
  }
  return reasons;
}

// The commonest layout mistake fails before any statistics: a single .npy of NHWC images for an
// NCHW model (or the reverse). Says so instead of only "shape mismatch".
std::string LayoutHint(const std::string& spec, const std::vector<data::InputSpec>& inputs) {
  if (inputs.size() != 1 || spec.size() < 4 || spec.compare(spec.size() - 4, 4, ".npy") != 0)
    return "";
  auto t = data::ReadNpy(spec);
  const std::vector<int64_t>& want = inputs[0].dims;
  if (!t.ok() || t->rank() != 4 || want.size() != 4) return "";
  const std::vector<int64_t>& d = t->dims();
  auto same = [](int64_t model_dim, int64_t data_dim) {
    return model_dim < 0 || model_dim == data_dim;
  };
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
    return Status(s.status().code(),
                  fmt::format("{} ({}; layout_swapped)", s.status().message(), hint));
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
    if (outs[0].not_batch_first[i] || outs[1].not_batch_first[i] || x.size() != y.size() ||
        x.empty())
      continue;
    double diff = 0, scale = 1e-30;
    for (size_t k = 0; k < x.size(); ++k) {
      diff = std::max(diff, std::fabs(static_cast<double>(x[k]) - y[k]));
      scale = std::max(scale, std::fabs(static_cast<double>(y[k])));
    }
    check->max_output_diff = std::max(check->max_output_diff, diff / scale);
  }
  return Status::Ok();
}

// What every rank sets up the same way: the model, its quantized activations and the chunking.
struct Setup {
  std::shared_ptr<const ir::Model> model;
  std::unique_ptr<runtime::Interpreter> interp;
  std::vector<std::string> activations;
  std::set<std::string> batch_first;  // inputs whose axis 0 is the batch
  int64_t samples = 0, chunk_size = 0;
  int chunks = 0;
};

// Per-sample input checks read [batch, ...] tensors: a recurrent state (batch on axis 1) or an
// unbatched scalar is no sample stream to check.
Status AddInputs(const std::set<std::string>& batch_first, const data::Batch& batch,
                 std::map<std::string, InputStatsAccumulator>* acc) {
  for (const auto& [name, tensor] : batch.inputs) {
    if (!batch_first.count(name)) continue;
    QK_RETURN_IF_ERROR(acc->try_emplace(name, name).first->second.Add(tensor));
  }
  return Status::Ok();
}

// Loads the model, finds the activations and fixes the chunking from the whole data (every rank
// opens all of it, so the chunks and the provenance are the same everywhere).
Status PrepareSetup(const DiagnoseOptions& o, Setup* setup, DiagnoseResult* r) {
  QK_ASSIGN_OR_RETURN(ir::Model loaded, LoadModelForQuantization(o.model));
  setup->model = std::make_shared<const ir::Model>(std::move(loaded));
  QK_ASSIGN_OR_RETURN(std::vector<passes::QdqSite> sites,
                      passes::FindQdqSites(*setup->model->graph, o.placement));
  setup->activations = passes::ActivationTensors(sites);
  r->batch.graph_reasons = BatchMixingNodes(*setup->model->graph);
  QK_ASSIGN_OR_RETURN(setup->interp, runtime::Interpreter::Create(setup->model));
  for (const data::InputSpec& spec : data::ModelInputs(*setup->model)) {
    if (spec.batch_axis == 0) setup->batch_first.insert(spec.name);
  }
  return Status::Ok();
}

// 1. This rank's shard of the calibration data: one collector set per chunk, per-channel
// abs-max, input statistics; then its shard of the reference data (collection.h says why the
// shards give one process's numbers).
Status CollectShard(const DiagnoseOptions& o, const distributed::Communicator& comm, Setup* setup,
                    DiagnoseCollection* part, DiagnoseResult* r) {
  QK_RETURN_IF_ERROR(PrepareSetup(o, setup, r));
  const ir::Model& model = *setup->model;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source, Open(o.data, model, o.samples));
  r->data = source->Describe();
  const int64_t n = source->num_samples();
  QK_RETURN_IF_NOT(n > 0, StatusCode::kInvalidArgument, "{}: no samples", r->data);
  r->samples = setup->samples = n;
  const int64_t k = (n + std::min<int64_t>(o.chunks, n) - 1) / std::min<int64_t>(o.chunks, n);
  setup->chunk_size = r->chunk_size = k;
  setup->chunks = static_cast<int>((n + k - 1) / k);
  part->chunks.resize(static_cast<size_t>(setup->chunks));
  for (CollectorMap& c : part->chunks) {
    for (const std::string& a : setup->activations) c.emplace(a, quant::TensorCollector());
  }
  // Shards on chunk boundaries: every chunk is one rank's (and runs restart at each).
  r->rank.shard = data::ShardOf(n, comm.rank(), comm.world_size(), /*granule=*/k);
  // The model runs on calibration's runs (data/run_chunks.h), restarting at every chunk: the
  // statistics depend on the sample index only, not on --batch-size or the ranks.
  const std::vector<data::InputSpec> inputs = data::ModelInputs(model);
  const int64_t run_batch = CalibrationRunBatch(inputs, std::nullopt);
  part->first_chunk = static_cast<int>(r->rank.shard.begin / k);
  part->end_chunk = static_cast<int>((r->rank.shard.end + k - 1) / k);
  if (comm.world_size() > 1) source = data::Slice(std::move(source), r->rank.shard);
  CollectingObserver observer(&part->chunks[0]);
  ChannelObserver channels(&part->chunks[0], &part->channels);
  PassOptions pass;
  pass.batch_size = o.batch_size;
  pass.run_batch = run_batch;
  pass.chunk_size = k;
  pass.label = "diagnose";
  pass.progress = o.progress && comm.is_root();
  PassHooks hooks;
  const int64_t offset = r->rank.shard.begin;  // the hooks count this rank's samples from 0
  hooks.before_run = [&](int64_t start, const data::Batch& batch) {
    observer.set_target(&part->chunks[static_cast<size_t>((offset + start) / k)]);
    return AddInputs(setup->batch_first, batch, &part->inputs);
  };
  const auto start = std::chrono::steady_clock::now();
  if (source->num_samples() > 0) {
    QK_RETURN_IF_ERROR(RunBatches(*setup->interp, ReadRuns(*source, pass, inputs),
                                  source->num_samples(), pass, {&observer, &channels}, hooks)
                           .status());
  }
  if (!o.reference_data.empty()) {
    QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> ref,
                        Open(o.reference_data, model, o.reference_samples));
    r->reference = ref->Describe();
    r->reference_samples = ref->num_samples();
    for (const std::string& a : setup->activations)
      part->reference.emplace(a, quant::TensorCollector());
    // Whole reads, so whole runs, as one process runs them.
    const data::ShardRange shard =
        data::ShardOf(ref->num_samples(), comm.rank(), comm.world_size(), ReadSize(*ref, pass));
    if (comm.world_size() > 1) ref = data::Slice(std::move(ref), shard);
    CollectingObserver ref_observer(&part->reference);
    PassOptions rp = pass;
    rp.chunk_size = 0;
    rp.label = "reference";
    PassHooks rh;
    rh.before_run = [&](int64_t, const data::Batch& batch) {
      return AddInputs(setup->batch_first, batch, &part->reference_inputs);
    };
    if (ref->num_samples() > 0) {
      QK_RETURN_IF_ERROR(RunBatches(*setup->interp, ReadRuns(*ref, rp, inputs), ref->num_samples(),
                                    rp, {&ref_observer}, rh)
                             .status());
    }
  }
  r->rank.work_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

// 2-5 on rank 0 (or the only process), from every rank's statistics: per-tensor analysis, the
// batch check, the reference comparison, the findings and the report files.
Status Analyse(const DiagnoseOptions& o, const Setup& setup, DiagnoseCollection all,
               ArtifactSet* out, std::chrono::steady_clock::time_point start_time,
               DiagnoseResult* result) {
  DiagnoseResult& r = *result;
  const std::vector<std::string>& activations = setup.activations;
  const int64_t n = setup.samples, k = setup.chunk_size;
  const int chunks = setup.chunks;
  for (const auto& [name, acc] : all.inputs) r.inputs.push_back(acc.Finalize());

  // 2. Per-tensor analysis from the chunks.
  const Resampling resampling = MakeResampling(chunks, o.bootstrap, o.subsets, o.seed);
  std::vector<int64_t> chunk_end;
  for (int i = 0; i < chunks; ++i) chunk_end.push_back(std::min<int64_t>(n, (i + 1) * k));
  auto channel_amax = [&all](const std::string& name) {
    auto it = all.channels.find(name);
    return it == all.channels.end() ? std::vector<float>{} : it->second.Finalize().amax;
  };
  // Tensors are independent and the chunk collectors are only read: analyse them in parallel
  // (the histogram methods over the resamples dominate diagnose's run time).
  std::map<std::string, quant::TensorCollector> full;
  for (const std::string& a : activations) full.emplace(a, quant::TensorCollector());
  std::vector<Result<TensorDiagnosis>> analysed(activations.size(),
                                                Status(StatusCode::kInternal, "not run"));
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < activations.size(); i = next++) {
      const std::string& a = activations[i];
      std::vector<const quant::TensorCollector*> parts;
      for (const CollectorMap& c : all.chunks) parts.push_back(&c.at(a));
      analysed[i] =
          AnalyzeTensor(a, parts, chunk_end, resampling, o.method, channel_amax(a), &full.at(a));
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
  all.chunks.clear();

  // 3. Batch-size dependence, measured (a few samples, here alone).
  if (o.batch_check_samples > 0) {
    QK_RETURN_IF_ERROR(
        MeasureBatchDependence(o, *setup.interp, *setup.model, activations, n, &r.batch));
  }

  // 4. Reference data: clipping and divergence per tensor, input statistics.
  if (!o.reference_data.empty()) {
    for (const auto& [name, acc] : all.reference_inputs)
      r.reference_inputs.push_back(acc.Finalize());
    for (TensorDiagnosis& t : r.tensors) {
      const quant::TensorCollector& c = all.reference.at(t.name);
      const quant::TensorCollector& f = full.at(t.name);
      t.ref_amax = c.range().amax;
      t.ref_clip_share = t.amax > 0 ? quant::ShareAbove(c.histogram(), t.amax) : 0.0;
      t.ref_js_bits =
          JensenShannonBits(f.histogram(), f.range().amax, c.histogram(), c.range().amax);
    }
  }

  // 5. Findings.
  AddFindings(o, &r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  r.summary = DiagnoseText(r);
  if (out) {
    const auto write_start = std::chrono::steady_clock::now();
    QK_ASSIGN_OR_RETURN(r.written, WriteDiagnoseSvgs(r, *out));
    QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("report.txt"), r.summary));
    // report.json lists every file of the set, itself included.
    r.written.push_back(out->Target("report.txt"));
    r.written.push_back(out->Target("report.json"));
    QK_RETURN_IF_ERROR(WriteFileAtomic(out->Stage("report.json"), DiagnoseJson(r)));
    QK_RETURN_IF_ERROR(out->Commit().status());
    r.rank.write_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  }
  return Status::Ok();
}

}  // namespace

Result<DiagnoseResult> Diagnose(const DiagnoseOptions& o) {
  QK_RETURN_IF_NOT(!o.data.empty(), StatusCode::kInvalidArgument, "give calibration data (--data)");
  QK_RETURN_IF_NOT(o.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive, got {}", o.batch_size);
  QK_RETURN_IF_NOT(o.chunks >= 1 && o.chunks <= kMaxChunks, StatusCode::kInvalidArgument,
                   "--chunks must be in [1, {}], got {}", kMaxChunks, o.chunks);
  QK_RETURN_IF_NOT(o.bootstrap >= 0 && o.bootstrap <= kMaxResamples && o.subsets >= 0 &&
                       o.subsets <= kMaxResamples,
                   StatusCode::kInvalidArgument,
                   "--bootstrap and --subsets must be in [0, {}], got {} and {}", kMaxResamples,
                   o.bootstrap, o.subsets);
  QK_RETURN_IF_NOT(o.ci_tolerance > 0 && o.cv_tolerance > 0, StatusCode::kInvalidArgument,
                   "--tolerance values must be positive");
  QK_ASSIGN_OR_RETURN(std::unique_ptr<distributed::Communicator> comm,
                      distributed::OpenCommunicator(o.distributed));
  const auto start_time = std::chrono::steady_clock::now();
  DiagnoseResult r;
  r.model = o.model;
  r.method = quant::MethodLabel(o.method);
  r.chosen = o.method;
  r.rank.rank = comm->rank();
  r.rank.world_size = comm->world_size();
  // -o is locked (by rank 0, which alone writes) before the long passes, so that a concurrent
  // run into the same directory fails at once; the reports and pictures then land together or
  // not at all.
  std::unique_ptr<ArtifactSet> out;
  Status status = Status::Ok();
  if (!o.output_dir.empty() && comm->is_root()) {
    Result<std::unique_ptr<ArtifactSet>> opened =
        ArtifactSet::Open(o.output_dir, {"report.txt", "report.json"});
    if (opened.ok()) {
      out = std::move(*opened);
    } else {
      status = opened.status();
    }
  }
  // Every rank collects its shard; a failure on any rank stops them all, naming it.
  Setup setup;
  DiagnoseCollection part;
  if (status.ok()) status = CollectShard(o, *comm, &setup, &part, &r);
  QK_RETURN_IF_ERROR(comm->Agree(status, "diagnosing the data"));
  const auto merge_start = std::chrono::steady_clock::now();
  Result<DiagnoseCollection> all = GatherCollectionOnRoot(*comm, std::move(part));
  r.rank.merge_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - merge_start).count();
  if (!comm->is_root()) {
    // Wait for rank 0's outcome: its failure to analyse or write fails this rank too.
    QK_RETURN_IF_ERROR(all.status());
    QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), "analysing and writing on rank 0"));
    r.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    return r;
  }
  status = all.ok() ? Analyse(o, setup, std::move(*all), out.get(), start_time, &r) : all.status();
  QK_RETURN_IF_ERROR(comm->Agree(status, "analysing and writing on rank 0"));
  return r;
}

}  // namespace quantkit::pipelines
