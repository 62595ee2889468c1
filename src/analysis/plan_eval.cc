#include "analysis/plan_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "analysis/model_loading.h"
#include "analysis/prefix_cache.h"
#include "common/check.h"
#include "ir/float16.h"
#include "runtime/interpreter.h"

namespace quantkit::analysis {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<runtime::NamedTensor> Feeds(const data::Batch& batch) {
  std::vector<runtime::NamedTensor> feeds;
  for (const auto& [name, t] : batch.inputs) feeds.push_back({name, t});
  return feeds;
}

// A float16 / bfloat16 output (an FP16 model's, as TensorRT hands it out) as float32, exactly:
// metrics and errors read float32.
Status WidenOutput(ir::Tensor* t) {
  if (!ir::Is16BitFloat(t->dtype())) return Status::Ok();
  QK_ASSIGN_OR_RETURN(*t, ir::ConvertFloatTensor(*t, ir::DType::kFloat));
  return Status::Ok();
}

Status CheckOutput(const runtime::NamedTensor& out, int64_t batch, int64_t width) {
  QK_RETURN_IF_NOT(out.tensor.dtype() == ir::DType::kFloat && out.tensor.rank() >= 1 &&
                       out.tensor.dims()[0] == batch && out.tensor.numel() == batch * width,
                   StatusCode::kInvalidArgument,
                   "output '{}' is not a float [{}, {}] tensor like the FP32 model's", out.name,
                   batch, width);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PlanEvaluator>> PlanEvaluator::Create(const PlanEvalOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive");
  auto e = std::unique_ptr<PlanEvaluator>(new PlanEvaluator());
  e->options_ = options;
  bool local_class_output = true;
  // Every rank loads the model and its shard; one rank's failure stops them all.
  const Status loaded = [&]() -> Status {
    if (options.loaded) {
      e->float_model_ = options.loaded;
    } else {
      QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(options.model));
      e->float_model_ = std::make_shared<const ir::Model>(std::move(model));
    }
    QK_ASSIGN_OR_RETURN(
        std::unique_ptr<data::Source> source,
        data::OpenSource(options.data, data::ModelInputs(*e->float_model_), options.image));
    // A held-out tail: samples [first_sample, first_sample + samples) of the data.
    source = data::Window(std::move(source), options.first_sample, options.samples);
    e->data_description_ = source->Describe();
    e->num_samples_ = source->num_samples();
    QK_RETURN_IF_NOT(e->num_samples_ > 0, StatusCode::kInvalidArgument, "{}: no samples",
                     e->data_description_);
    // Shards hold whole batches: every rank runs the batches (and shape groups) one process runs.
    const int64_t batch_size = data::EffectiveBatchSize(*source, options.batch_size);
    e->shard_ = data::ShardOf(e->num_samples_, e->rank(), e->world_size(), batch_size);
    if (e->world_size() > 1) source = data::Slice(std::move(source), e->shard_);
    QK_ASSIGN_OR_RETURN(auto fp32, runtime::Interpreter::Create(e->float_model_));
    e->has_labels_ = true;
    double run_seconds = 0;
    const int64_t n = source->num_samples();
    for (int64_t s = 0; s < n; s += batch_size) {
      QK_ASSIGN_OR_RETURN(std::vector<data::Batch> groups,
                          data::ReadStackable(*source, s, std::min(batch_size, n - s)));
      for (data::Batch& batch : groups) {
        const int64_t count = batch.size;
        e->has_labels_ &= batch.labels.has_value();
        const auto start = std::chrono::steady_clock::now();
        QK_ASSIGN_OR_RETURN(auto outs, fp32->Run(Feeds(batch)));
        run_seconds += Since(start);
        if (!outs.empty()) QK_RETURN_IF_ERROR(WidenOutput(&outs[0].tensor));
        QK_RETURN_IF_NOT(!outs.empty() && outs[0].tensor.dtype() == ir::DType::kFloat &&
                             outs[0].tensor.rank() >= 1 && outs[0].tensor.dims()[0] == count,
                         StatusCode::kInvalidArgument,
                         "{}: the first output is not a float [batch, ...] tensor", options.model);
        const ir::Tensor& out = outs[0].tensor;
        local_class_output &= IsClassOutput(out.dims());
        e->reference_.push_back(out);
        e->batches_.push_back(std::move(batch));
      }
    }
    e->fp32_seconds_ = run_seconds;
    local_class_output = local_class_output && !IsNormalisedEmbedding(*e->float_model_->graph);
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(e->Agree(loaded, "running the FP32 model"));
  // Properties of the whole data: every rank must pick the same default metric.
  std::vector<int64_t> flags{e->has_labels_ ? 0 : 1, local_class_output ? 0 : 1};
  if (options.comm)
    QK_RETURN_IF_ERROR(options.comm->AllReduceSum(&flags, "combining data properties"));
  e->has_labels_ = flags[0] == 0;
  e->class_output_ = flags[1] == 0;
  return e;
}

Status PlanEvaluator::Agree(const Status& local, const std::string& step) const {
  return options_.comm ? options_.comm->Agree(local, step) : local;
}

Result<std::vector<double>> PlanEvaluator::GatherBatchRows(std::vector<double> local, size_t stride,
                                                           const std::string& what) const {
  if (world_size() == 1) return local;
  const std::string bytes(reinterpret_cast<const char*>(local.data()),
                          local.size() * sizeof(double));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> parts, options_.comm->AllGather(bytes, what));
  // Shards are contiguous and in rank order: rank order is batch order.
  std::vector<double> rows;
  for (const std::string& part : parts) {
    const size_t n = part.size() / sizeof(double);
    QK_CHECK(n * sizeof(double) == part.size() && (stride == 0 || n % stride == 0),
             "{}: a rank sent {} bytes", what, part.size());
    const size_t old = rows.size();
    rows.resize(old + n);
    std::memcpy(rows.data() + old, part.data(), part.size());
  }
  return rows;
}

bool PlanEvaluator::class_output() const { return class_output_; }

Status PlanEvaluator::CheckMetrics(const std::vector<Metric*>& metrics) const {
  for (Metric* m : metrics) {
    QK_RETURN_IF_NOT(!m->needs_labels() || has_labels_, StatusCode::kInvalidArgument,
                     "metric '{}' needs labelled data; {} has none", m->name(), data_description_);
    QK_RETURN_IF_NOT(world_size() == 1 || !m->State().empty(), StatusCode::kUnsupported,
                     "metric '{}' has no Metric::State(): it cannot be combined across processes",
                     m->name());
    m->Reset();
  }
  return Status::Ok();
}

namespace {

// Runs one batch's metrics: those with a state start from zero and append it to `row` (combined
// in batch order later); those without one (one process only) accumulate as they go.
Status UpdateMetrics(const std::vector<Metric*>& metrics, const MetricBatch& mb,
                     const ErrorStats& error, std::vector<double>* row) {
  error.AppendState(row);
  for (Metric* m : metrics) {
    const bool has_state = !m->State().empty();
    if (has_state) m->Reset();
    QK_RETURN_IF_ERROR(m->Update(mb));
    if (has_state) {
      const std::vector<double> state = m->State();
      row->insert(row->end(), state.begin(), state.end());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TrialResult> PlanEvaluator::CombineTrial(const Status& local, std::vector<double> rows,
                                                const std::vector<Metric*>& metrics) const {
  QK_RETURN_IF_ERROR(Agree(local, "running a trial"));
  size_t stride = ErrorStats::kStateSize;
  for (Metric* m : metrics) stride += m->State().size();
  QK_ASSIGN_OR_RETURN(rows, GatherBatchRows(std::move(rows), stride, "combining a trial"));
  TrialResult r;
  for (Metric* m : metrics) {
    if (!m->State().empty()) m->Reset();
  }
  for (size_t at = 0; at + stride <= rows.size(); at += stride) {
    r.output.Merge(ErrorStats::FromState(rows.data() + at));
    size_t offset = at + ErrorStats::kStateSize;
    for (Metric* m : metrics) {
      const size_t k = m->State().size();
      if (k == 0) continue;
      m->AddState(std::vector<double>(rows.begin() + static_cast<std::ptrdiff_t>(offset),
                                      rows.begin() + static_cast<std::ptrdiff_t>(offset + k)));
      offset += k;
    }
  }
  for (Metric* m : metrics) r.metrics[m->name()] = m->Value();
  return r;
}

Result<TrialResult> PlanEvaluator::EvaluateFp32(const std::vector<Metric*>& metrics) const {
  QK_RETURN_IF_ERROR(CheckMetrics(metrics));
  std::vector<double> rows;
  const Status local = [&]() -> Status {
    for (size_t i = 0; i < batches_.size(); ++i) {
      const float* ref = reference_[i].data_as<float>();
      const int64_t n = batches_[i].size ? batches_[i].size : reference_[i].dims()[0];
      const int64_t width =
          reference_[i].numel() / n;  // per batch: shapes may differ between batches
      MetricBatch mb{ref,
                     ref,
                     n,
                     width,
                     batches_[i].labels ? batches_[i].labels->data_as<int64_t>() : nullptr,
                     reference_[i].dims().back()};
      ErrorStats error;
      error.Add(ref, ref, n * width);
      QK_RETURN_IF_ERROR(UpdateMetrics(metrics, mb, error, &rows));
    }
    return Status::Ok();
  }();
  QK_ASSIGN_OR_RETURN(TrialResult r, CombineTrial(local, std::move(rows), metrics));
  r.seconds = fp32_seconds_;
  return r;
}

Result<TrialResult> PlanEvaluator::EvaluatePlan(const quant::QuantPlan& plan,
                                                const std::vector<Metric*>& metrics,
                                                const ObserverFor& observer,
                                                const PrefixCache* cache) const {
  // A clone of the loaded float model: the file is read and prepared once per search, not per
  // trial.
  QK_ASSIGN_OR_RETURN(ir::Model model,
                      BuildSimulationModel(*float_model_, plan, options_.simulation));
  return EvaluateModel(std::move(model), metrics, observer, cache);
}

Result<TrialResult> PlanEvaluator::EvaluateModel(ir::Model model,
                                                 const std::vector<Metric*>& metrics,
                                                 const ObserverFor& observer,
                                                 const PrefixCache* cache) const {
  const auto start = std::chrono::steady_clock::now();
  QK_RETURN_IF_ERROR(CheckMetrics(metrics));
  std::vector<double> rows;
  const Status local = [&]() -> Status {
    std::vector<std::string> cached;  // graph inputs fed from the cache
    if (cache && !observer) {
      QK_ASSIGN_OR_RETURN(cached, cache->Cut(&model));
    }
    runtime::InterpreterOptions interpreter_options;
    // Cached activations are not user inputs (the user's were checked by the FP32 run).
    interpreter_options.check_finite_inputs = cached.empty();
    QK_ASSIGN_OR_RETURN(auto interpreter,
                        runtime::Interpreter::Create(std::move(model), interpreter_options));
    for (size_t i = 0; i < batches_.size(); ++i) {
      runtime::RunOptions run_options;
      if (observer) {
        if (runtime::Observer* o = observer(i)) run_options.observers = {o};
      }
      std::vector<runtime::NamedTensor> feeds = Feeds(batches_[i]);
      for (const std::string& name : cached) feeds.push_back({name, cache->Activation(name, i)});
      QK_ASSIGN_OR_RETURN(auto outs, interpreter->Run(feeds, run_options));
      const int64_t n = reference_[i].dims()[0];
      const int64_t width = reference_[i].numel() / n;
      QK_RETURN_IF_NOT(!outs.empty(), StatusCode::kInvalidArgument, "the model has no outputs");
      QK_RETURN_IF_ERROR(WidenOutput(&outs[0].tensor));
      QK_RETURN_IF_ERROR(CheckOutput(outs[0], n, width));
      const float* out = outs[0].tensor.data_as<float>();
      const float* ref = reference_[i].data_as<float>();
      MetricBatch mb{out,
                     ref,
                     n,
                     width,
                     batches_[i].labels ? batches_[i].labels->data_as<int64_t>() : nullptr,
                     reference_[i].dims().back()};
      ErrorStats error;
      error.Add(out, ref, n * width);
      QK_RETURN_IF_ERROR(UpdateMetrics(metrics, mb, error, &rows));
    }
    return Status::Ok();
  }();
  QK_ASSIGN_OR_RETURN(TrialResult r, CombineTrial(local, std::move(rows), metrics));
  r.seconds = Since(start);
  return r;
}

Status PlanEvaluator::RunFp32(const ObserverFor& observer) const {
  const Status local = [&]() -> Status {
    QK_ASSIGN_OR_RETURN(auto fp32, runtime::Interpreter::Create(float_model_));
    for (size_t i = 0; i < batches_.size(); ++i) {
      runtime::RunOptions run_options;
      if (observer) {
        if (runtime::Observer* o = observer(i)) run_options.observers = {o};
      }
      QK_RETURN_IF_ERROR(fp32->Run(Feeds(batches_[i]), run_options).status());
    }
    return Status::Ok();
  }();
  return Agree(local, "running the FP32 model");
}

}  // namespace quantkit::analysis
