#include "pipelines/qat/qat.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "analysis/model_loading.h"
#include "analysis/simulate.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/progress.h"
#include "pipelines/calibrate.h"
#include "pipelines/qat/plot.h"
#include "data/shard.h"
#include "data/npy.h"
#include "data/source.h"
#include "formats/ranges.h"
#include "formats/trt_cache.h"
#include "onnx/export.h"
#include "passes/fake_quant.h"

namespace quantkit::pipelines {

namespace {

namespace fs = std::filesystem;

// The float model as the student starts from it: BatchNormalization folded into its Conv.
Result<ir::Model> LoadFolded(const std::string& path, int* folded) {
  QK_ASSIGN_OR_RETURN(ir::Model m, analysis::LoadModelForQuantization(path));
  QK_ASSIGN_OR_RETURN(passes::PassReport bn, passes::RunPass(m, passes::FoldBatchNorm()));
  if (folded) *folded = static_cast<int>(bn.Count(passes::counter::kFolded));
  return m;
}

// Initializers the optimizer updates: weights (behind their FakeQuantize) and biases of the
// weighted ops, normalization scale and shift, and learned activation scales.
std::vector<std::string> TrainableParameters(const ir::Graph& g,
                                             const std::map<std::string, std::string>& learned_scales) {
  static const std::set<std::string> kWeighted{"Conv", "ConvTranspose", "Gemm", "MatMul"};
  static const std::set<std::string> kNorms{"BatchNormalization", "LayerNormalization", "InstanceNormalization",
                                            "GroupNormalization"};
  std::vector<std::string> names;
  std::set<std::string> seen;
  auto add = [&](const ir::Value* v) {
    if (v && v->producer() && v->producer()->op_type() == "FakeQuantize") v = v->producer()->input(0);
    if (v && v->is_constant() && v->initializer->dtype() == ir::DType::kFloat && seen.insert(v->name()).second) {
      names.push_back(v->name());
    }
  };
  for (const ir::Node* n : g.nodes()) {
    if (!n->domain().empty()) continue;
    if (kWeighted.count(n->op_type())) {
      for (const ir::Value* v : n->inputs()) add(v);
    } else if (kNorms.count(n->op_type())) {
      add(n->input(1));
      add(n->input(2));
    }
  }
  for (const auto& [tensor, scale] : learned_scales) add(g.FindValue(scale));
  return names;
}

train::TrainingBatch ToTraining(data::Batch&& b) {
  train::TrainingBatch t;
  for (auto& [name, tensor] : b.inputs) t.inputs.push_back({name, std::move(tensor)});
  t.labels = std::move(b.labels);
  return t;
}

// Samples `indices` of `source` stacked into one batch: each Read(i, 1) is a contiguous [1, ...]
// tensor, so stacking is concatenating their bytes.
Result<train::TrainingBatch> GatherSamples(const data::Source& source, const std::vector<int64_t>& indices) {
  std::vector<data::Batch> parts;
  for (int64_t i : indices) {
    QK_ASSIGN_OR_RETURN(data::Batch b, source.Read(i, 1));
    QK_RETURN_IF_NOT(parts.empty() || (b.labels.has_value() == parts.front().labels.has_value() &&
                                       b.inputs.size() == parts.front().inputs.size()),
                     StatusCode::kInvalidArgument, "{}: sample {} differs in inputs or labels from the first",
                     source.Describe(), i);
    parts.push_back(std::move(b));
  }
  QK_RETURN_IF_NOT(!parts.empty(), StatusCode::kInvalidArgument, "empty batch");
  const int64_t n = static_cast<int64_t>(parts.size());
  auto stack = [&](auto get) -> Result<ir::Tensor> {
    const ir::Tensor& first = get(parts.front());
    std::vector<int64_t> dims = first.dims();
    QK_RETURN_IF_NOT(!dims.empty() && dims[0] == 1, StatusCode::kInternal, "a sample is not [1, ...]");
    dims[0] = n;
    ir::Tensor out(first.dtype(), dims);
    uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
    for (const data::Batch& b : parts) {
      const ir::Tensor& t = get(b);
      QK_RETURN_IF_NOT(t.dims() == first.dims() && t.dtype() == first.dtype(), StatusCode::kInvalidArgument,
                       "{}: samples of different shapes cannot share a batch", source.Describe());
      std::memcpy(dst, t.data(), t.nbytes());
      dst += t.nbytes();
    }
    return out;
  };
  train::TrainingBatch out;
  for (size_t k = 0; k < parts.front().inputs.size(); ++k) {
    QK_ASSIGN_OR_RETURN(ir::Tensor t, stack([k](const data::Batch& b) -> const ir::Tensor& { return b.inputs[k].second; }));
    out.inputs.push_back({parts.front().inputs[k].first, std::move(t)});
  }
  if (parts.front().labels.has_value()) {
    QK_ASSIGN_OR_RETURN(ir::Tensor l, stack([](const data::Batch& b) -> const ir::Tensor& { return *b.labels; }));
    out.labels = std::move(l);
  }
  return out;
}

std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates: portable, unlike std::shuffle
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

// Top-1 against labels when the data has them, else argmax agreement with the FP32 model. Under a
// launch each rank evaluates its shard (whole batches: the batches one process runs) and the
// counts are summed exactly, so every rank gets one process's value.
Result<double> Validate(const train::QatTrainer& trainer, const data::Source& val, int64_t batch_size,
                        distributed::Communicator& comm, std::string* metric) {
  enum { kSamples, kCorrect, kAgree, kUnlabelled, kCounts };
  std::vector<int64_t> counts(kCounts, 0);
  const data::ShardRange shard = data::ShardOf(val.num_samples(), comm.rank(), comm.world_size(), batch_size);
  const Status local = [&]() -> Status {
    for (int64_t start = shard.begin; start < shard.end; start += batch_size) {
      QK_ASSIGN_OR_RETURN(data::Batch b, val.Read(start, std::min(batch_size, shard.end - start)));
      counts[kUnlabelled] += b.labels.has_value() ? 0 : 1;
      QK_ASSIGN_OR_RETURN(train::EvalCounts c, trainer.Evaluate(ToTraining(std::move(b))));
      counts[kSamples] += c.samples, counts[kCorrect] += c.correct, counts[kAgree] += c.agree_teacher;
    }
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm.Agree(local, "validating"));
  QK_RETURN_IF_ERROR(comm.AllReduceSum(&counts, "summing validation counts"));
  QK_RETURN_IF_NOT(counts[kSamples] > 0, StatusCode::kInvalidArgument, "validation data '{}' holds no samples",
                   val.Describe());
  const bool labelled = counts[kUnlabelled] == 0;
  *metric = labelled ? "top1" : "agreement";
  return static_cast<double>(labelled ? counts[kCorrect] : counts[kAgree]) / static_cast<double>(counts[kSamples]);
}

// Data-parallel step: every rank's gradients and step result, added in rank order (in double)
// and divided by the number of ranks. Each rank's loss is the mean over its equal share of the
// global batch, so the average is the global batch's gradient; rank order makes the sum, and so
// the update, the same bits on every rank.
Status AverageOverRanks(distributed::Communicator& comm, std::vector<float>* gradients, train::StepResult* r) {
  const double losses[4] = {r->loss, r->distill, r->label, r->feature};
  std::string bytes(reinterpret_cast<const char*>(losses), sizeof(losses));
  bytes.append(reinterpret_cast<const char*>(gradients->data()), gradients->size() * sizeof(float));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(bytes, "averaging gradients"));
  std::vector<double> sum(gradients->size(), 0.0);
  double loss_sum[4] = {0, 0, 0, 0};
  for (const std::string& part : all) {
    QK_RETURN_IF_NOT(part.size() == bytes.size(), StatusCode::kInternal,
                     "a rank sent {} bytes of gradients, this rank {}", part.size(), bytes.size());
    double l[4];
    std::memcpy(l, part.data(), sizeof(l));
    for (int i = 0; i < 4; ++i) loss_sum[i] += l[i];
    const char* g = part.data() + sizeof(l);
    for (size_t i = 0; i < sum.size(); ++i) {
      float v;
      std::memcpy(&v, g + i * sizeof(float), sizeof(float));
      sum[i] += v;
    }
  }
  const double n = static_cast<double>(all.size());
  for (size_t i = 0; i < sum.size(); ++i) (*gradients)[i] = static_cast<float>(sum[i] / n);
  r->loss = loss_sum[0] / n, r->distill = loss_sum[1] / n, r->label = loss_sum[2] / n, r->feature = loss_sum[3] / n;
  return Status::Ok();
}

void SetInitializers(ir::Graph& g, const std::vector<runtime::NamedTensor>& values) {
  for (const runtime::NamedTensor& v : values) {
    ir::Value* target = g.FindValue(v.name);
    if (target == nullptr || !target->initializer.has_value()) continue;  // learned scales: not in g
    ir::Tensor t = v.tensor;
    t.name = v.name;
    target->initializer = std::move(t);
  }
}

// --labels: one class index per sample of the whole training data (so that --samples takes the
// first labels with the first samples); a file of another length is another data set's labels.
Result<std::vector<int64_t>> ReadLabels(const QatOptions& o, int64_t all_samples, int64_t n) {
  std::vector<int64_t> labels;
  if (o.labels.empty()) return labels;
  QK_RETURN_IF_NOT(o.trainer.label_weight > 0, StatusCode::kInvalidArgument,
                   "--labels {}: the label-free loss uses no labels; use --loss ce, ce+kl or ce+mse", o.labels);
  QK_ASSIGN_OR_RETURN(ir::Tensor l, data::ReadNpy(o.labels));
  QK_RETURN_IF_NOT((l.dtype() == ir::DType::kInt64 || l.dtype() == ir::DType::kInt32) && l.rank() == 1 &&
                       l.numel() == all_samples,
                   StatusCode::kInvalidArgument,
                   "{}: labels must be int32/int64 [{}] (one per sample of '{}'), got {}[{}]", o.labels,
                   all_samples, o.data, ir::DTypeName(l.dtype()), fmt::join(l.dims(), ","));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = l.dtype() == ir::DType::kInt64 ? l.data_as<int64_t>()[i] : l.data_as<int32_t>()[i];
    QK_RETURN_IF_NOT(v >= 0, StatusCode::kInvalidArgument, "{}: label {} of sample {} is negative", o.labels, v, i);
    labels.push_back(v);
  }
  return labels;
}

// Classes of the first output [batch, ...] when its shape is static (0 otherwise): labels can
// then be checked before training rather than at the batch that holds a bad one.
int64_t StaticClasses(const ir::Model& m) {
  if (m.graph->outputs().empty()) return 0;
  const std::optional<std::vector<int64_t>> dims = m.graph->outputs().front()->type.ConcreteDims();
  if (!dims.has_value() || dims->size() < 2) return 0;
  int64_t classes = 1;
  for (size_t i = 1; i < dims->size(); ++i) {
    if ((*dims)[i] < 0) return 0;
    classes *= (*dims)[i];
  }
  return classes;
}

const char* LossName(const train::TrainerOptions& t) {
  if (t.label_weight > 0 && t.distill_weight > 0) return "cross-entropy+distillation";
  if (t.label_weight > 0) return "cross-entropy";
  return t.distill == train::DistillLoss::kMse ? "distillation-mse" : "distillation-kl";
}

}  // namespace

Result<QatResult> RunQat(const QatOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  QK_RETURN_IF_NOT(o.batch_size > 0, StatusCode::kInvalidArgument, "--batch-size must be > 0, got {}", o.batch_size);
  QK_RETURN_IF_NOT(!o.output_dir.empty(), StatusCode::kInvalidArgument, "an output directory (-o) is required");
  QK_RETURN_IF_NOT(o.steps >= 0 && o.epochs >= 0, StatusCode::kInvalidArgument, "--steps/--epochs must be >= 0");
  QatResult result;
  QK_ASSIGN_OR_RETURN(std::unique_ptr<distributed::Communicator> comm, distributed::OpenCommunicator(o.distributed));
  const int world = comm->world_size();
  QK_RETURN_IF_NOT(world == 1 || !o.plan.empty(), StatusCode::kInvalidArgument,
                   "qat under a distributed launch needs --plan (calibrate first, under the same launch: "
                   "docs/distributed.md)");
  QK_RETURN_IF_NOT(o.batch_size % world == 0, StatusCode::kInvalidArgument,
                   "--batch-size {} is the global batch: it must be a multiple of the {} ranks", o.batch_size, world);
  const int64_t local_batch = o.batch_size / world;  // this rank's samples of each global batch
  result.rank.rank = comm->rank();
  result.rank.world_size = world;

  // 1. The plan: given, or calibrated now on the calibration data.
  quant::QuantPlan plan;
  if (!o.plan.empty()) {
    QK_ASSIGN_OR_RETURN(plan, analysis::ReadPlanFile(o.plan));
  } else {
    CalibrateOptions c;
    c.model = o.model;
    c.data = o.calib_data.empty() ? o.data : o.calib_data;
    c.image = o.image;
    c.samples = o.calib_samples;
    c.method = o.method;
    c.placement = o.placement;
    c.progress = o.progress;
    QK_ASSIGN_OR_RETURN(CalibrateResult cal, Calibrate(c));
    plan = std::move(cal.plan);
  }
  // Weight scales follow the fine-tuned weights unless frozen: drop the plan's so that
  // ApplyPlan recomputes them (max|w|/127 per channel) from the weights it is given.
  quant::QuantPlan train_plan = plan;
  if (o.recompute_weight_scales) {
    for (auto it = train_plan.tensors.begin(); it != train_plan.tensors.end();) {
      it = it->second.role == quant::TensorRole::kWeight ? train_plan.tensors.erase(it) : std::next(it);
    }
  }
  analysis::SimulationOptions sim;
  sim.placement = o.placement;

  // 2. Student training graph, teacher, trainer.
  QK_ASSIGN_OR_RETURN(ir::Model training, LoadFolded(o.model, &result.folded_batch_norms));
  {
    quant::QuantPlan p = train_plan;
    QK_ASSIGN_OR_RETURN(passes::PassReport inserted, passes::RunPass(training, passes::ApplyPlan(&p, sim)));
    QK_RETURN_IF_NOT(inserted.changed, StatusCode::kInvalidArgument,
                     "the plan quantizes nothing in '{}': nothing to fine-tune", o.model);
    // Frozen weight scales: keep those just filled for BN-folded weights too, so the export
    // writes the scales training used.
    if (!o.recompute_weight_scales) train_plan = std::move(p);
  }
  passes::FakeQuantOptions fq_options;
  fq_options.recompute_weight_scales = o.recompute_weight_scales;
  fq_options.learn_activation_scales = o.learn_activation_scales;
  QK_ASSIGN_OR_RETURN(passes::PassReport fq, passes::RunPass(training, passes::QdqToFakeQuant(fq_options)));
  result.weight_pairs = static_cast<int>(fq.Count(passes::counter::kWeightPairs));
  result.activation_pairs = static_cast<int>(fq.Count(passes::counter::kActivationPairs));
  const std::map<std::string, std::string> learned_scales = passes::LearnedActivationScales(*training.graph);
  const std::vector<std::string> params = TrainableParameters(*training.graph, learned_scales);
  result.parameters = static_cast<int>(params.size());
  QK_ASSIGN_OR_RETURN(ir::Model teacher, analysis::LoadModelForQuantization(o.model));
  const std::vector<data::InputSpec> inputs = data::ModelInputs(teacher);

  // 3. Data: training (shuffled per epoch with the seed), optional labels and validation.
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> train_src, data::OpenSource(o.data, inputs, o.image));
  const int64_t all_samples = train_src->num_samples();
  train_src = data::Take(std::move(train_src), o.samples);
  const int64_t n = train_src->num_samples();
  QK_RETURN_IF_NOT(n >= o.batch_size, StatusCode::kInvalidArgument,
                   "training data '{}' holds {} samples, fewer than one batch of {}", o.data, n, o.batch_size);
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> labels, ReadLabels(o, all_samples, n));
  if (const int64_t classes = StaticClasses(teacher); classes > 0 && !labels.empty()) {
    const int64_t top = *std::max_element(labels.begin(), labels.end());
    QK_RETURN_IF_NOT(top < classes, StatusCode::kInvalidArgument,
                     "{}: label {} is out of range for the model's {} outputs (labels must be in [0, {}))", o.labels,
                     top, classes, classes);
  }
  std::unique_ptr<data::Source> val_src;
  if (!o.val.empty()) {
    QK_ASSIGN_OR_RETURN(val_src, data::OpenSource(o.val, inputs, o.image));
    val_src = data::Take(std::move(val_src), o.val_samples);
  }
  result.steps_per_epoch = n / o.batch_size;  // whole batches only
  const int64_t total = o.steps > 0 ? o.steps : std::max<int64_t>(o.epochs, 1) * result.steps_per_epoch;
  train::TrainerOptions topts = o.trainer;
  topts.total_steps = total;
  if (topts.warmup_steps == 0) topts.warmup_steps = static_cast<int64_t>(std::floor(o.warmup_fraction * total));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<train::QatTrainer> trainer,
                      train::QatTrainer::Create(std::move(training), std::move(teacher), params, topts));

  std::error_code ec;
  if (comm->is_root()) fs::create_directories(o.output_dir, ec);  // rank 0 alone writes
  QK_RETURN_IF_NOT(!ec, StatusCode::kIoError, "{}: cannot create output directory: {}", o.output_dir, ec.message());
  const fs::path dir(o.output_dir);
  const std::string checkpoint = (dir / "checkpoint.pt").string();

  // 4. Training, resumable.
  std::vector<runtime::NamedTensor> best;
  double best_metric = -1;
  train::CheckpointExtras extras;
  if (!o.resume.empty()) {
    QK_ASSIGN_OR_RETURN(extras, trainer->LoadCheckpoint(o.resume));
    best = extras.best;
    if (extras.values.count("best_metric")) best_metric = extras.values["best_metric"];
    if (extras.values.count("best_step")) result.best_step = static_cast<int64_t>(extras.values["best_step"]);
    if (extras.values.count("val_ptq")) result.val_ptq = extras.values["val_ptq"];
    QK_RETURN_IF_NOT(trainer->steps_done() <= total, StatusCode::kInvalidArgument,
                     "{}: the checkpoint is at step {}, past the {} steps asked for", o.resume,
                     trainer->steps_done(), total);
  }
  auto evaluate = [&](int64_t step) -> Status {
    if (!val_src) return Status::Ok();
    QK_ASSIGN_OR_RETURN(double m, Validate(*trainer, *val_src, o.batch_size, *comm, &result.metric));
    result.evals.push_back({step, m});
    if (m > best_metric) {
      best_metric = m;
      result.best_step = step;
      QK_ASSIGN_OR_RETURN(best, trainer->Parameters());
    }
    return Status::Ok();
  };
  auto save_checkpoint = [&]() -> Status {  // by rank 0; every rank learns its outcome
    train::CheckpointExtras x;
    x.best = best;
    x.values["best_metric"] = best_metric;
    x.values["best_step"] = static_cast<double>(result.best_step);
    if (result.val_ptq) x.values["val_ptq"] = *result.val_ptq;
    return comm->Agree(comm->is_root() ? trainer->SaveCheckpoint(checkpoint, x) : Status::Ok(), "saving the checkpoint");
  };
  if (trainer->steps_done() == 0) {
    QK_RETURN_IF_ERROR(evaluate(0));
    if (!result.evals.empty()) result.val_ptq = result.evals.back().metric;
  }
  nlohmann::json log_steps = nlohmann::json::array();
  const int64_t eval_every = o.eval_every > 0 ? o.eval_every : result.steps_per_epoch;
  Progress bar("qat", total - trainer->steps_done(), "steps");
  if (!o.progress || !comm->is_root()) bar.set_enabled(false);
  // Time of the training steps alone (batch assembly included, validation and checkpoints not).
  double train_seconds = 0, cpu_seconds = 0;
  const int64_t first_step = trainer->steps_done();
  std::vector<int64_t> perm;
  int64_t perm_epoch = -1;
  for (int64_t s = first_step; s < total; ++s) {
    const int64_t epoch = s / result.steps_per_epoch;
    if (epoch != perm_epoch) perm = Permutation(n, o.seed, epoch), perm_epoch = epoch;
    const int64_t offset = (s % result.steps_per_epoch) * o.batch_size;
    // This rank's slice of the global batch (all of it in one process).
    const int64_t mine = offset + comm->rank() * local_batch;
    const std::vector<int64_t> idx(perm.begin() + mine, perm.begin() + mine + local_batch);
    const auto step_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    // Every rank reaches the step's one Agree: inside the reducer once its gradients exist, or
    // here with the error that stopped it before (so no rank waits for a gradient never sent).
    bool reduced = false;
    const std::string step_name = fmt::format("QAT step {}", s + 1);
    train::QatTrainer::GradientReducer reducer;
    if (world > 1) {
      reducer = [&](std::vector<float>* gradients, train::StepResult* r) -> Status {
        reduced = true;
        QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), step_name));
        return AverageOverRanks(*comm, gradients, r);
      };
    }
    Result<train::StepResult> stepped = [&]() -> Result<train::StepResult> {
      QK_ASSIGN_OR_RETURN(train::TrainingBatch batch, GatherSamples(*train_src, idx));
      if (!labels.empty()) {
        std::vector<int64_t> l;
        for (int64_t i : idx) l.push_back(labels[static_cast<size_t>(i)]);
        batch.labels = ir::Tensor::FromVector(ir::DType::kInt64, {local_batch}, l);
      }
      return trainer->Step(batch, reducer);
    }();
    if (!stepped.ok() && world > 1 && !reduced) QK_RETURN_IF_ERROR(comm->Agree(stepped.status(), step_name));
    QK_ASSIGN_OR_RETURN(train::StepResult r, std::move(stepped));
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    cpu_seconds += static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    if (s == first_step) result.first_loss = r.loss;
    result.final_loss = r.loss;
    log_steps.push_back({{"step", s + 1}, {"epoch", epoch}, {"loss", r.loss}, {"distill", r.distill},
                         {"label", r.label}, {"feature", r.feature}, {"lr", r.lr}});
    bar.set_note(fmt::format("  loss {:.4g}", r.loss));
    bar.Advance(1);
    if ((s + 1) % eval_every == 0 || s + 1 == total) {
      QK_RETURN_IF_ERROR(evaluate(s + 1));
      QK_RETURN_IF_ERROR(save_checkpoint());
    }
    if (o.stop_after > 0 && s + 1 - first_step >= o.stop_after && s + 1 < total) {
      QK_RETURN_IF_ERROR(save_checkpoint());
      result.paused = true;
      break;
    }
  }
  bar.Finish();
  result.steps = trainer->steps_done();
  // Its slice of every global batch (positions in the batch, not sample numbers), one pass a step.
  result.rank.shard = {comm->rank() * local_batch, (comm->rank() + 1) * local_batch};
  result.rank.passes = result.steps - first_step;
  result.rank.work_seconds = train_seconds;
  if (result.paused) {
    result.summary = fmt::format("qat: stopped at step {} of {} (--stop-after); continue with --resume {}\n",
                                 result.steps, total, checkpoint);
    result.written.push_back(checkpoint);
    return result;
  }
  const int64_t ran = result.steps - first_step;
  result.seconds_per_step = ran > 0 ? train_seconds / static_cast<double>(ran) : 0.0;
  result.cpu_seconds_per_step = ran > 0 ? cpu_seconds / static_cast<double>(ran) : 0.0;
  if (val_src && !best.empty()) {
    QK_RETURN_IF_ERROR(trainer->SetParameters(best));  // keep the best
    result.val_best = best_metric;
  }
  // Every rank holds the same parameters; rank 0 writes and the others wait for its outcome.
  if (!comm->is_root()) {
    QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), "writing the results on rank 0"));
    return result;
  }
  // 5. Outputs: the fine-tuned float model, then the plan and Q/DQ model built from it.
  const Status written = [&]() -> Status {
    QK_ASSIGN_OR_RETURN(std::vector<runtime::NamedTensor> final_params, trainer->Parameters());
    QK_ASSIGN_OR_RETURN(ir::Model tuned, LoadFolded(o.model, nullptr));
    SetInitializers(*tuned.graph, final_params);
    QK_RETURN_IF_ERROR(onnx_io::ExportModel(tuned, (dir / "model.float.onnx").string()));
    quant::QuantPlan final_plan = train_plan;
    for (const auto& [tensor, scale_name] : learned_scales) {
      for (const runtime::NamedTensor& p : final_params) {
        if (p.name != scale_name) continue;
        const float s = p.tensor.data_as<float>()[0];
        QK_RETURN_IF_NOT(std::isfinite(s) && s > 0, StatusCode::kInvalidArgument,
                         "learned scale of '{}' ended at {}: not a usable scale (lower --lr)", tensor, s);
        final_plan.SetScale(tensor, {s}, -1, quant::TensorRole::kActivation, "qat-lsq");
      }
    }
    final_plan.provenance.method =
        fmt::format("qat(from={}, loss={}, steps={}, batch={}, final_loss={:.6g})",
                    plan.provenance.method.empty() ? "plan" : plan.provenance.method, LossName(topts), result.steps,
                    o.batch_size, result.final_loss);
    final_plan.provenance.data_description = train_src->Describe();
    final_plan.provenance.data_sha256 = train_src->Fingerprint();
    final_plan.provenance.num_samples = result.steps * o.batch_size;
    ir::Model qdq = std::move(tuned);
    QK_RETURN_IF_ERROR(passes::RunPass(qdq, passes::ApplyPlan(&final_plan, sim)).status());
    QK_RETURN_IF_ERROR(quant::ValidatePlan(final_plan));
    QK_RETURN_IF_ERROR(onnx_io::ExportModel(qdq, (dir / "model.qdq.onnx").string()));
    QK_RETURN_IF_ERROR(formats::WriteTrtCache((dir / "calib.cache").string(), final_plan, {}));
    QK_RETURN_IF_ERROR(formats::WritePlanJson((dir / "plan.json").string(), final_plan));

    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.peak_rss_bytes = PeakRssBytes();
    nlohmann::json log{{"model", o.model},
                       {"data", train_src->Describe()},
                       {"plan", o.plan.empty() ? "calibrated: " + plan.provenance.method : o.plan},
                       {"loss", LossName(topts)},
                       {"optimizer", topts.optimizer == train::OptimizerKind::kSgd ? "sgd" : "adamw"},
                       {"lr", topts.lr},
                       {"warmup_steps", topts.warmup_steps},
                       {"batch_size", o.batch_size},
                       {"seed", o.seed},
                       {"steps", result.steps},
                       {"steps_per_epoch", result.steps_per_epoch},
                       {"seconds", result.seconds},
                       {"seconds_per_step", result.seconds_per_step},
                       {"cpu_seconds_per_step", result.cpu_seconds_per_step},
                       {"peak_rss_bytes", result.peak_rss_bytes},
                       {"metric", result.metric},
                       {"best_step", result.best_step},
                       {"history", log_steps}};
    nlohmann::json evals = nlohmann::json::array();
    for (const QatEval& e : result.evals) evals.push_back({{"step", e.step}, {"value", e.metric}});
    log["evals"] = evals;
    if (result.val_ptq) log["val_ptq"] = *result.val_ptq;
    if (result.val_best) log["val_best"] = *result.val_best;
    QK_RETURN_IF_ERROR(WriteFileAtomic((dir / "training_log.json").string(), log.dump(1) + "\n"));
    TrainingCurve curve;
    for (const nlohmann::json& e : log_steps) {
      curve.loss.emplace_back(e.at("step").get<int64_t>(), e.at("loss").get<double>());
    }
    for (const QatEval& e : result.evals) curve.val.emplace_back(e.step, e.metric);
    curve.title = fmt::format("qat {}: {} loss per step", std::filesystem::path(o.model).filename().string(),
                              LossName(topts));
    curve.metric = result.metric;
    QK_RETURN_IF_ERROR(WriteFileAtomic((dir / "training.svg").string(), TrainingSvg(curve)));

    std::string& sum = result.summary;
    sum = fmt::format("qat: {} steps ({:.2f} epochs of {} samples, batch {}), loss {:.4g} -> {:.4g}, {:.3f} s/step ({:.3f} s CPU)\n",
                      result.steps, static_cast<double>(result.steps) / static_cast<double>(result.steps_per_epoch), n,
                      o.batch_size, result.first_loss, result.final_loss, result.seconds_per_step,
                      result.cpu_seconds_per_step);
    sum += fmt::format("  {} BatchNormalization folded, {} weight and {} activation fake-quant pairs, {} parameters\n",
                       result.folded_batch_norms, result.weight_pairs, result.activation_pairs, result.parameters);
    if (result.val_ptq && result.val_best) {
      sum += fmt::format("  validation {}: PTQ {:.2f}% -> QAT {:.2f}% (best at step {})\n", result.metric,
                         100 * *result.val_ptq, 100 * *result.val_best, result.best_step);
    }
    QK_RETURN_IF_ERROR(WriteFileAtomic((dir / "summary.txt").string(), sum));
    for (const char* f : {"model.qdq.onnx", "model.float.onnx", "calib.cache", "plan.json", "training_log.json",
                          "training.svg", "summary.txt", "checkpoint.pt"}) {
      result.written.push_back((dir / f).string());
    }
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm->Agree(written, "writing the results on rank 0"));
  return result;
}

}  // namespace quantkit::pipelines
