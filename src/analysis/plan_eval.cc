#include "analysis/plan_eval.h"

#include <fmt/format.h>

#include <chrono>

#include "analysis/model_loading.h"
#include "common/check.h"
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

Status CheckOutput(const runtime::NamedTensor& out, int64_t batch, int64_t width) {
  QK_RETURN_IF_NOT(out.tensor.dtype() == ir::DType::kFloat && out.tensor.rank() >= 1 &&
                       out.tensor.dims()[0] == batch && out.tensor.numel() == batch * width,
                   StatusCode::kInvalidArgument,
                   "output '{}' is not a float [{}, {}] tensor like the FP32 model's", out.name, batch,
                   width);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PlanEvaluator>> PlanEvaluator::Create(const PlanEvalOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument, "--batch-size must be positive");
  auto e = std::unique_ptr<PlanEvaluator>(new PlanEvaluator());
  e->options_ = options;
  QK_ASSIGN_OR_RETURN(ir::Model model, LoadModelForQuantization(options.model));
  e->float_model_ = std::make_shared<const ir::Model>(std::move(model));
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(options.data, data::ModelInputs(*e->float_model_)));
  source = data::Take(data::Skip(std::move(source), options.first_sample), options.samples);
  e->data_description_ = source->Describe();
  e->num_samples_ = source->num_samples();
  QK_RETURN_IF_NOT(e->num_samples_ > 0, StatusCode::kInvalidArgument, "{}: no samples", e->data_description_);
  QK_ASSIGN_OR_RETURN(auto fp32, runtime::Interpreter::Create(e->float_model_));
  e->has_labels_ = true;
  double run_seconds = 0;
  const int64_t batch_size = data::EffectiveBatchSize(*source, options.batch_size);
  for (int64_t s = 0; s < e->num_samples_; s += batch_size) {
    QK_ASSIGN_OR_RETURN(std::vector<data::Batch> groups,
                        data::ReadStackable(*source, s, std::min(batch_size, e->num_samples_ - s)));
    for (data::Batch& batch : groups) {
      const int64_t count = batch.size;
      e->has_labels_ &= batch.labels.has_value();
      const auto start = std::chrono::steady_clock::now();
      QK_ASSIGN_OR_RETURN(auto outs, fp32->Run(Feeds(batch)));
      run_seconds += Since(start);
      QK_RETURN_IF_NOT(!outs.empty() && outs[0].tensor.dtype() == ir::DType::kFloat &&
                           outs[0].tensor.rank() >= 1 && outs[0].tensor.dims()[0] == count,
                       StatusCode::kInvalidArgument, "{}: the first output is not a float [batch, ...] tensor",
                       options.model);
      e->width_ = outs[0].tensor.numel() / count;
      e->reference_.push_back(outs[0].tensor);
      e->batches_.push_back(std::move(batch));
    }
  }
  e->fp32_seconds_ = run_seconds;
  return e;
}

bool PlanEvaluator::class_output() const {
  for (const ir::Tensor& r : reference_) {
    if (r.rank() != 2 || r.dims()[1] < 2) return false;
  }
  return !reference_.empty();
}

Result<TrialResult> PlanEvaluator::EvaluateFp32(const std::vector<Metric*>& metrics) const {
  TrialResult r;
  for (Metric* m : metrics) {
    QK_RETURN_IF_NOT(!m->needs_labels() || has_labels_, StatusCode::kInvalidArgument,
                     "metric '{}' needs labelled data; {} has none", m->name(), data_description_);
    m->Reset();
  }
  for (size_t i = 0; i < batches_.size(); ++i) {
    const float* ref = reference_[i].data_as<float>();
    const int64_t n = batches_[i].size ? batches_[i].size : reference_[i].dims()[0];
    const int64_t width = reference_[i].numel() / n;  // per batch: shapes may differ between batches
    MetricBatch mb{ref, ref, n, width,
                   batches_[i].labels ? batches_[i].labels->data_as<int64_t>() : nullptr};
    for (Metric* m : metrics) QK_RETURN_IF_ERROR(m->Update(mb));
    r.output.Add(ref, ref, n * width);
  }
  for (Metric* m : metrics) r.metrics[m->name()] = m->Value();
  r.seconds = fp32_seconds_;
  return r;
}

Result<TrialResult> PlanEvaluator::EvaluatePlan(const quant::QuantPlan& plan,
                                                const std::vector<Metric*>& metrics,
                                                const ObserverFor& observer) const {
  QK_ASSIGN_OR_RETURN(ir::Model model, BuildSimulationModel(options_.model, plan, options_.simulation));
  return EvaluateModel(std::move(model), metrics, observer);
}

Result<TrialResult> PlanEvaluator::EvaluateModel(ir::Model model, const std::vector<Metric*>& metrics,
                                                 const ObserverFor& observer) const {
  const auto start = std::chrono::steady_clock::now();
  QK_ASSIGN_OR_RETURN(auto interpreter, runtime::Interpreter::Create(std::move(model)));
  for (Metric* m : metrics) {
    QK_RETURN_IF_NOT(!m->needs_labels() || has_labels_, StatusCode::kInvalidArgument,
                     "metric '{}' needs labelled data; {} has none", m->name(), data_description_);
    m->Reset();
  }
  TrialResult r;
  for (size_t i = 0; i < batches_.size(); ++i) {
    runtime::RunOptions run_options;
    if (observer) {
      if (runtime::Observer* o = observer(i)) run_options.observers = {o};
    }
    QK_ASSIGN_OR_RETURN(auto outs, interpreter->Run(Feeds(batches_[i]), run_options));
    const int64_t n = reference_[i].dims()[0];
    const int64_t width = reference_[i].numel() / n;
    QK_RETURN_IF_NOT(!outs.empty(), StatusCode::kInvalidArgument, "the model has no outputs");
    QK_RETURN_IF_ERROR(CheckOutput(outs[0], n, width));
    const float* out = outs[0].tensor.data_as<float>();
    const float* ref = reference_[i].data_as<float>();
    MetricBatch mb{out, ref, n, width,
                   batches_[i].labels ? batches_[i].labels->data_as<int64_t>() : nullptr};
    for (Metric* m : metrics) QK_RETURN_IF_ERROR(m->Update(mb));
    r.output.Add(out, ref, n * width);
  }
  for (Metric* m : metrics) r.metrics[m->name()] = m->Value();
  r.seconds = Since(start);
  return r;
}

Status PlanEvaluator::RunFp32(const ObserverFor& observer) const {
  QK_ASSIGN_OR_RETURN(auto fp32, runtime::Interpreter::Create(float_model_));
  for (size_t i = 0; i < batches_.size(); ++i) {
    runtime::RunOptions run_options;
    if (observer) {
      if (runtime::Observer* o = observer(i)) run_options.observers = {o};
    }
    QK_RETURN_IF_ERROR(fp32->Run(Feeds(batches_[i]), run_options).status());
  }
  return Status::Ok();
}

}  // namespace quantkit::analysis
