// QAT validation (docs/qat.md, "Validation"): the metric by the output-aware rule analyze and
// fallback use, the FP32 teacher's outputs computed once, and a lexicographic score (the metric,
// then rel_mse vs FP32) so that equal top-1/agreement values are decided by the output error
// rather than by which step came first.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {

namespace {

Result<train::TrainingBatch> ReadBatch(const Validation& v, int64_t start) {
  QK_ASSIGN_OR_RETURN(data::Batch b,
                      v.source->Read(start, std::min(v.batch_size, v.shard.end - start)));
  return ToTraining(std::move(b));
}

std::vector<analysis::Metric*> Metrics(const Validation& v) {
  std::vector<analysis::Metric*> m{v.metric.get()};
  if (v.tiebreak) m.push_back(v.tiebreak.get());
  return m;
}

// Every rank's per-batch rows, in rank order: the batch order of one process.
Result<std::vector<double>> GatherRows(distributed::Communicator& comm,
                                       const std::vector<double>& local) {
  if (comm.world_size() == 1) return local;
  const std::string bytes(reinterpret_cast<const char*>(local.data()),
                          local.size() * sizeof(double));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                      comm.AllGather(bytes, "gathering validation scores"));
  std::vector<double> rows;
  for (const std::string& part : parts) {
    QK_RETURN_IF_NOT(part.size() % sizeof(double) == 0, StatusCode::kInternal,
                     "a rank sent {} bytes of validation scores", part.size());
    const size_t old = rows.size();
    rows.resize(old + part.size() / sizeof(double));
    std::memcpy(rows.data() + old, part.data(), part.size());
  }
  return rows;
}

}  // namespace

Result<Validation> OpenValidation(const QatOptions& o, const TrainingData& data,
                                  const train::QatTrainer& trainer, distributed::Communicator& comm,
                                  QatResult* result) {
  Validation v;
  result->holdout = data.holdout;
  if (!data.val) {
    QK_RETURN_IF_NOT(
        o.metric.empty(), StatusCode::kInvalidArgument,
        "--metric {}: nothing validates this run (give --val, or leave --holdout at its default)",
        o.metric);
    return v;
  }
  v.source = data.val.get();
  v.batch_size = o.batch_size;
  v.shard = data::ShardOf(v.source->num_samples(), comm.rank(), comm.world_size(), o.batch_size);
  enum { kSamples, kUnlabelled, kNotClass, kFlags };
  std::vector<int64_t> flags(kFlags, 0);
  int64_t cached = 0;
  // The teacher runs once over the validation data: its outputs are the reference of every
  // validation, and their shape and the labels decide the metric.
  const Status local = [&]() -> Status {
    for (int64_t start = v.shard.begin; start < v.shard.end; start += v.batch_size) {
      QK_ASSIGN_OR_RETURN(train::TrainingBatch b, ReadBatch(v, start));
      flags[kUnlabelled] += b.labels.has_value() ? 0 : 1;
      QK_ASSIGN_OR_RETURN(ir::Tensor ref, trainer.TeacherOutput(b));
      flags[kSamples] += ref.rank() >= 1 ? ref.dims()[0] : 0;
      flags[kNotClass] += analysis::IsClassOutput(ref.dims()) ? 0 : 1;
      const int64_t bytes = static_cast<int64_t>(ref.nbytes());
      if (cached + bytes <= kTeacherCacheBytes) {
        cached += bytes;
        v.teacher.emplace_back(std::move(ref));
      } else {
        v.teacher.emplace_back(std::nullopt);
      }
    }
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm.Agree(local, "running the FP32 model on the validation data"));
  QK_RETURN_IF_ERROR(comm.AllReduceSum(&flags, "combining validation data properties"));
  QK_RETURN_IF_NOT(flags[kSamples] > 0, StatusCode::kInvalidArgument,
                   "validation data '{}' holds no samples", v.source->Describe());
  v.has_labels = flags[kUnlabelled] == 0;
  QK_ASSIGN_OR_RETURN(
      v.metric, analysis::MakeOutputAwareMetric(o.metric, v.has_labels, flags[kNotClass] == 0));
  QK_RETURN_IF_NOT(!v.metric->needs_labels() || v.has_labels, StatusCode::kInvalidArgument,
                   "--metric {} needs labelled validation data; {} has none", v.metric->name(),
                   data.val_description);
  if (v.metric->name() != "rel_mse") {
    QK_ASSIGN_OR_RETURN(v.tiebreak, analysis::MakeMetric("rel_mse"));
  }
  result->metric = v.metric->name();
  result->higher_is_better = v.metric->higher_is_better();
  result->tiebreak = v.tiebreak ? v.tiebreak->name() : "";
  result->val_data = data.val_description;
  return v;
}

Result<QatScore> Validate(const train::QatTrainer& trainer, const Validation& v,
                          distributed::Communicator& comm) {
  const std::vector<analysis::Metric*> metrics = Metrics(v);
  // Each batch's row: every metric's state (Metric::State) after that batch alone.
  std::vector<double> rows;
  const Status local = [&]() -> Status {
    size_t k = 0;
    for (int64_t start = v.shard.begin; start < v.shard.end; start += v.batch_size, ++k) {
      QK_ASSIGN_OR_RETURN(train::TrainingBatch b, ReadBatch(v, start));
      QK_ASSIGN_OR_RETURN(ir::Tensor out, trainer.StudentOutput(b));
      ir::Tensor recomputed;
      const ir::Tensor* ref = v.teacher.at(k) ? &*v.teacher[k] : nullptr;
      if (ref == nullptr) {
        QK_ASSIGN_OR_RETURN(recomputed, trainer.TeacherOutput(b));
        ref = &recomputed;
      }
      QK_RETURN_IF_NOT(out.rank() >= 1 && out.dims() == ref->dims(), StatusCode::kInvalidArgument,
                       "the QAT model's first output has another shape than the FP32 model's");
      const int64_t n = out.dims()[0];
      const int64_t* labels = nullptr;
      if (b.labels.has_value()) {
        QK_RETURN_IF_NOT(b.labels->dtype() == ir::DType::kInt64 && b.labels->numel() == n,
                         StatusCode::kInvalidArgument, "{}: labels are not int64 [{}]",
                         v.source->Describe(), n);
        labels = b.labels->data_as<int64_t>();
      }
      const analysis::MetricBatch mb{
          out.data_as<float>(), ref->data_as<float>(), n, n > 0 ? out.numel() / n : 0, labels,
          out.dims().back()};
      for (analysis::Metric* m : metrics) {
        m->Reset();
        QK_RETURN_IF_ERROR(m->Update(mb));
        const std::vector<double> state = m->State();
        rows.insert(rows.end(), state.begin(), state.end());
      }
    }
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm.Agree(local, "validating"));
  QK_ASSIGN_OR_RETURN(const std::vector<double> all, GatherRows(comm, rows));
  for (analysis::Metric* m : metrics) m->Reset();
  for (size_t at = 0; at < all.size();) {
    for (analysis::Metric* m : metrics) {
      const size_t width = m->State().size();
      QK_CHECK(at + width <= all.size(), "validation rows end inside a batch");
      m->AddState(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(at),
                                      all.begin() + static_cast<std::ptrdiff_t>(at + width)));
      at += width;
    }
  }
  QatScore s;
  s.metric = v.metric->Value();
  if (v.tiebreak) s.tiebreak = v.tiebreak->Value();
  return s;
}

bool Better(const QatScore& a, const QatScore& b, bool higher_is_better) {
  // NaN (a diverged run) is never better, and anything beats it.
  if (std::isnan(a.metric) != std::isnan(b.metric)) return std::isnan(b.metric);
  if (a.metric != b.metric && !std::isnan(a.metric))
    return higher_is_better ? a.metric > b.metric : a.metric < b.metric;
  const bool ta = a.tiebreak.has_value() && !std::isnan(*a.tiebreak);
  const bool tb = b.tiebreak.has_value() && !std::isnan(*b.tiebreak);
  if (!ta || !tb) return ta && !tb;
  return *a.tiebreak < *b.tiebreak;
}

}  // namespace quantkit::pipelines::qat
