#include "pipelines/evaluate/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/check.h"
#include "common/file_checks.h"
#include "common/progress.h"
#include "data/npy.h"
#include "data/shard.h"
#include "data/source.h"
#include "formats/plan_files.h"
#include "ir/float16.h"
#include "onnx/import.h"
#include "passes/lower_float8.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

// Evaluation compares first outputs: a model without graph outputs has nothing to evaluate.
Result<std::unique_ptr<runtime::Interpreter>> Load(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(path));
  QK_RETURN_IF_NOT(!model.graph->outputs().empty(), StatusCode::kInvalidModel,
                   "{}: the model has no graph outputs, nothing to evaluate", path);
  // An FP8 Q/DQ model (ModelOpt's --quantize_mode fp8): its pairs run as E4M3 fake quantization.
  if (passes::HasFloat8(model)) {
    Result<passes::Float8Lowering> lowered = passes::LowerFloat8ForSimulation(model);
    if (!lowered.ok()) return lowered.status().WithContext(path);
  }
  return runtime::Interpreter::Create(std::move(model));
}

// Rows of a [B, C] float output (any trailing dims flattened into C).
struct Rows {
  const float* data = nullptr;
  int64_t batch = 0;
  int64_t width = 0;
  int64_t last = 0;  // the output's last axis (a frame's classes)
};

Result<Rows> AsRows(std::vector<runtime::NamedTensor>& outs, int64_t batch) {
  QK_RETURN_IF_NOT(!outs.empty(), StatusCode::kInvalidModel, "the model produced no outputs");
  runtime::NamedTensor& out = outs.front();
  // A float16/bfloat16 output (a model written with --cast-io) is compared in float32: exact.
  if (ir::Is16BitFloat(out.tensor.dtype())) {
    QK_ASSIGN_OR_RETURN(out.tensor, ir::ConvertFloatTensor(out.tensor, ir::DType::kFloat));
  }
  QK_RETURN_IF_NOT(out.tensor.dtype() == ir::DType::kFloat && out.tensor.rank() >= 1 &&
                       out.tensor.dims()[0] == batch,
                   StatusCode::kInvalidArgument,
                   "output '{}' is not a float [batch, ...] tensor (dtype {}, rank {})", out.name,
                   ir::DTypeName(out.tensor.dtype()), out.tensor.rank());
  return Rows{out.tensor.data_as<float>(), batch, batch ? out.tensor.numel() / batch : 0,
              out.tensor.dims().back()};
}

// Per-batch floating-point sums (agreement with the reference, then each metric's state):
// added in sample order at the end, whichever process computed which batch.
struct BatchSums {
  std::vector<double> values;  // batches x stride
  size_t stride = 0;
};

// Raw bytes of a vector of trivially copyable values, and back.
template <typename T>
std::string ToBytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <typename T>
void AppendFromBytes(const std::string& bytes, std::vector<T>* out) {
  const size_t n = bytes.size() / sizeof(T);
  const size_t old = out->size();
  out->resize(old + n);
  std::memcpy(out->data() + old, bytes.data(), n * sizeof(T));
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every figure eval reports, as analysis metrics (one metric path): top-1/top-5 with labels,
// argmax agreement and the output error with a reference, then the caller's metrics. Each keeps
// its state per batch, added in sample order at the end, whichever process ran which batch.
struct Figures {
  analysis::Top1Metric top1;
  analysis::Top5Metric top5;
  analysis::AgreementMetric agreement;
  analysis::OutputErrorMetric error;
  std::vector<analysis::Metric*> labelled;   // top1, top5: batches with labels
  std::vector<analysis::Metric*> reference;  // agreement, error, then the caller's metrics

  Figures(bool with_reference, const std::vector<analysis::Metric*>& extra)
      : labelled{&top1, &top5} {
    if (with_reference) reference = {&agreement, &error};
    reference.insert(reference.end(), extra.begin(), extra.end());
  }
};

}  // namespace

Result<EvalResult> Evaluate(const EvalOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument,
                   "--batch-size must be positive");
  // Where the outputs go is checked before the pass, not after it.
  QK_RETURN_IF_ERROR(CheckOutputFile(options.save_predictions, "--save-predictions"));
  QK_RETURN_IF_ERROR(CheckOutputFile(options.save_outputs, "--save-outputs"));
  std::unique_ptr<distributed::Communicator> comm;
  if (options.single_process) {
    comm = distributed::SingleProcessCommunicator();
  } else {
    QK_ASSIGN_OR_RETURN(comm, distributed::OpenCommunicator(options.distributed));
  }
  EvalResult result;
  BatchSums sums;
  std::unique_ptr<Figures> figures;
  bool with_reference = false;
  const bool keep_outputs = options.keep_outputs || !options.save_outputs.empty();
  // Every rank evaluates its shard; a failure on any rank stops them all.
  const Status evaluated = [&]() -> Status {
    std::unique_ptr<runtime::Interpreter> interpreter, reference;
    if (options.simulates()) {
      quant::QuantPlan plan;
      if (options.loaded_plan) {
        plan = *options.loaded_plan;
      } else {
        QK_ASSIGN_OR_RETURN(plan, analysis::ReadPlanFile(options.plan));
        // A cache or range file's entries that cannot be used (a NaN, Inf, negative, zero or
        // denormal scale) are simulated in float: said, as convert says it of the same file.
        Result<formats::ArtifactKind> kind = formats::ArtifactKindFromPath(options.plan);
        if (kind.ok() && kind.value() != formats::ArtifactKind::kPlanJson) {
          for (const auto& [name, t] : plan.tensors) {
            if (!t.quantized && !t.reason.empty())
              result.warnings.push_back(name + ": " + t.reason + " (kept in float)");
          }
        }
      }
      QK_ASSIGN_OR_RETURN(ir::Model simulated,
                          analysis::BuildSimulationModel(options.model, plan, options.simulation));
      QK_ASSIGN_OR_RETURN(interpreter, runtime::Interpreter::Create(std::move(simulated)));
      QK_ASSIGN_OR_RETURN(
          reference,
          Load(options.reference_model.empty() ? options.model : options.reference_model));
    } else {
      QK_ASSIGN_OR_RETURN(interpreter, Load(options.model));
      if (!options.reference_model.empty()) {
        QK_ASSIGN_OR_RETURN(reference, Load(options.reference_model));
      }
    }
    with_reference = reference != nullptr;
    QK_RETURN_IF_NOT(options.metrics.empty() || reference, StatusCode::kInvalidArgument,
                     "metrics compare with a reference: give --reference or --plan");
    figures = std::make_unique<Figures>(with_reference, options.metrics);
    // Metrics with an exact state are kept per batch (see Metric::State); others (a caller's)
    // run through.
    bool all_have_state = true;
    for (auto* group : {&figures->labelled, &figures->reference}) {
      for (analysis::Metric* m : *group) {
        m->Reset();
        all_have_state = all_have_state && !m->State().empty();
        sums.stride += m->State().size();
      }
    }
    QK_RETURN_IF_NOT(all_have_state || comm->world_size() == 1, StatusCode::kUnsupported,
                     "a metric without Metric::State() cannot be combined across processes");
    QK_ASSIGN_OR_RETURN(
        std::unique_ptr<data::Source> source,
        data::OpenSource(options.data, data::ModelInputs(interpreter->model()), options.image));
    source = data::Window(std::move(source), options.first_sample, options.samples);
    result.samples = source->num_samples();
    // Fixed-batch models cap the batch; shards hold whole batches, so every rank runs the batches
    // (and groups of equal shapes) one process would.
    const int64_t batch_size = data::EffectiveBatchSize(*source, options.batch_size);
    source = distributed::ShardForRank(std::move(source), *comm, batch_size, &result.rank);
    const int64_t n = source->num_samples();
    int64_t timed_runs = 0;
    std::pair<double, double> first_run_seconds{0, 0};  // model, reference
    Progress progress("eval", n, "samples");
    if (!options.progress || !comm->is_root()) progress.set_enabled(false);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < n; s += batch_size) {
      QK_ASSIGN_OR_RETURN(std::vector<data::Batch> groups,
                          data::ReadStackable(*source, s, std::min(batch_size, n - s)));
      for (data::Batch& batch : groups) {
        const int64_t count = batch.size;
        std::vector<runtime::NamedTensor> feeds;
        for (auto& [name, t] : batch.inputs) feeds.push_back({name, std::move(t)});
        const auto model_start = std::chrono::steady_clock::now();
        QK_ASSIGN_OR_RETURN(auto outs, interpreter->Run(feeds));
        const double model_seconds = SecondsSince(model_start);
        result.model_seconds += model_seconds;
        if (timed_runs++ == 0) first_run_seconds.first = model_seconds;
        QK_ASSIGN_OR_RETURN(Rows rows, AsRows(outs, count));
        result.output_width = rows.width;
        if (keep_outputs)
          result.outputs.insert(result.outputs.end(), rows.data, rows.data + count * rows.width);
        for (int64_t b = 0; b < count; ++b) {
          const float* row = rows.data + b * rows.width;
          result.predictions.push_back(std::max_element(row, row + rows.width) - row);
        }
        // Each stateful metric's part of this batch, in a fixed order (stride per batch).
        auto update = [&](analysis::Metric* m, const analysis::MetricBatch& mb,
                          bool applies) -> Status {
          const bool has_state = !m->State().empty();
          if (has_state) m->Reset();
          if (applies) QK_RETURN_IF_ERROR(m->Update(mb));
          if (has_state) {
            const std::vector<double> state = m->State();
            sums.values.insert(sums.values.end(), state.begin(), state.end());
          }
          return Status::Ok();
        };
        const int64_t* labels = batch.labels ? batch.labels->data_as<int64_t>() : nullptr;
        // Labels name classes: an output of one value per sample (a score) has none, and the
        // labels of its data do not apply (a QAT run on labelled data failed here after
        // training).
        const bool labelled = labels != nullptr && rows.width >= 2;
        const analysis::MetricBatch own{rows.data, nullptr, count, rows.width, labels, rows.last};
        for (analysis::Metric* m : figures->labelled) QK_RETURN_IF_ERROR(update(m, own, labelled));
        if (reference) {
          const auto reference_start = std::chrono::steady_clock::now();
          QK_ASSIGN_OR_RETURN(auto ref_outs, reference->Run(feeds));
          const double reference_seconds = SecondsSince(reference_start);
          result.reference_seconds += reference_seconds;
          if (timed_runs == 1) first_run_seconds.second = reference_seconds;
          QK_ASSIGN_OR_RETURN(Rows ref, AsRows(ref_outs, count));
          QK_RETURN_IF_NOT(
              ref.width == rows.width, StatusCode::kInvalidArgument,
              "the reference model's first output has {} values per sample, the model's {}",
              ref.width, rows.width);
          const analysis::MetricBatch mb{rows.data, ref.data, count, rows.width, labels, rows.last};
          for (analysis::Metric* m : figures->reference) {
            QK_RETURN_IF_NOT(!m->needs_labels() || mb.labels, StatusCode::kInvalidArgument,
                             "metric '{}' needs labelled data", m->name());
            QK_RETURN_IF_ERROR(update(m, mb, true));
          }
        }
        progress.Advance(count);
      }
    }
    progress.Finish();
    // With a reference, both passes are timed from the second run on: a shape's first call builds
    // oneDNN's kernels, a one-time cost that would land on whichever model ran first (the
    // simulated one) and, on a small model, outweigh the passes themselves.
    if (reference && timed_runs > 1) {
      result.model_seconds -= first_run_seconds.first;
      result.reference_seconds -= first_run_seconds.second;
    }
    result.rank.work_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::Ok();
  }();
  QK_RETURN_IF_ERROR(comm->Agree(evaluated, "evaluating"));

  // Combine on rank 0: per-batch metric states / predictions / outputs in rank order (= sample
  // order). Nothing is combined in one process.
  const auto merge_start = std::chrono::steady_clock::now();
  if (comm->world_size() > 1) {
    QK_ASSIGN_OR_RETURN(auto all_sums,
                        comm->GatherToRoot(ToBytes(sums.values), "gathering metric states"));
    QK_ASSIGN_OR_RETURN(auto all_preds,
                        comm->GatherToRoot(ToBytes(result.predictions), "gathering predictions"));
    std::vector<std::string> all_outputs;
    if (keep_outputs) {
      QK_ASSIGN_OR_RETURN(all_outputs,
                          comm->GatherToRoot(ToBytes(result.outputs), "gathering outputs"));
    }
    // A rank without samples never saw an output: take the width any rank saw.
    std::vector<int64_t> widths(static_cast<size_t>(comm->world_size()), 0);
    widths[static_cast<size_t>(comm->rank())] = result.output_width;
    QK_RETURN_IF_ERROR(comm->AllReduceSum(&widths, "output width"));
    result.output_width = *std::max_element(widths.begin(), widths.end());
    sums.values.clear();
    result.predictions.clear();
    result.outputs.clear();
    for (size_t r = 0; r < all_sums.size(); ++r) {
      AppendFromBytes(all_sums[r], &sums.values);
      AppendFromBytes(all_preds[r], &result.predictions);
      if (keep_outputs) AppendFromBytes(all_outputs[r], &result.outputs);
    }
  }
  result.rank.merge_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - merge_start).count();
  if (!comm->is_root()) {
    result.predictions.clear();
    result.outputs.clear();
    result.seconds = result.rank.work_seconds;
    QK_RETURN_IF_ERROR(comm->Agree(Status::Ok(), "saving results on rank 0"));
    return result;
  }
  result.seconds = result.rank.work_seconds + result.rank.merge_seconds;
  // The batches' states added in sample order, per metric.
  const size_t stride = sums.stride;
  const size_t batches = stride ? sums.values.size() / stride : 0;
  for (auto* group : {&figures->labelled, &figures->reference}) {
    for (analysis::Metric* m : *group) {
      if (!m->State().empty()) m->Reset();
    }
  }
  for (size_t b = 0; b < batches; ++b) {
    const double* v = sums.values.data() + b * stride;
    size_t offset = 0;
    for (auto* group : {&figures->labelled, &figures->reference}) {
      for (analysis::Metric* m : *group) {
        const size_t k = m->State().size();
        if (k == 0) continue;
        m->AddState(std::vector<double>(v + offset, v + offset + k));
        offset += k;
      }
    }
  }
  if (figures->top1.total() > 0) {
    result.top1 = figures->top1.Value();
    result.top5 = figures->top5.Value();
  }
  if (with_reference) {
    // The same statistics and definitions as analyze's (all-zero outputs: cosine 1, not 0).
    const analysis::ErrorStats& error = figures->error.stats();
    Agreement a;
    a.argmax_agreement = figures->agreement.Value();
    a.cosine = error.cosine();
    a.sqnr_db = error.sqnr_db();
    a.max_abs_error = error.max_abs;
    result.agreement = a;
  }
  for (analysis::Metric* m : options.metrics) result.metrics[m->name()] = m->Value();
  const auto write_start = std::chrono::steady_clock::now();
  const Status saved = [&]() -> Status {
    if (!options.save_predictions.empty()) {
      auto t = ir::Tensor::FromVector<int64_t>(
          ir::DType::kInt64, {static_cast<int64_t>(result.predictions.size())}, result.predictions);
      QK_RETURN_IF_ERROR(data::WriteNpy(options.save_predictions, t));
      result.written.push_back(options.save_predictions);
    }
    if (!options.save_outputs.empty()) {
      auto t = ir::Tensor::FromVector<float>(ir::DType::kFloat,
                                             {result.samples, result.output_width}, result.outputs);
      QK_RETURN_IF_ERROR(data::WriteNpy(options.save_outputs, t));
      result.written.push_back(options.save_outputs);
    }
    return Status::Ok();
  }();
  result.rank.write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  QK_RETURN_IF_ERROR(comm->Agree(saved, "saving results on rank 0"));
  return result;
}

std::string FormatEval(const EvalOptions& options, const EvalResult& r) {
  std::string s = !options.simulates()
                      ? ""
                      : fmt::format("plan: {} (simulated INT8)\n",
                                    options.loaded_plan ? "in memory" : options.plan);
  for (const std::string& w : r.warnings) s += "warning: " + w + "\n";
  s += fmt::format("model: {}\ndata: {} ({} samples, {:.2f} s, {:.1f} samples/s)\n", options.model,
                   options.data, r.samples, r.seconds,
                   static_cast<double>(r.samples) / std::max(r.seconds, 1e-9));
  if (r.top1) s += fmt::format("top-1: {:.4f}\ntop-5: {:.4f}\n", *r.top1, *r.top5);
  if (r.agreement) {
    s += fmt::format(
        "vs {}: argmax agreement {:.4f}, cosine {:.6f}, SQNR {:.2f} dB, max |error| {:.4g}\n",
        options.reference_model.empty() ? options.model + " (FP32)" : options.reference_model,
        r.agreement->argmax_agreement, r.agreement->cosine, r.agreement->sqnr_db,
        r.agreement->max_abs_error);
  }
  for (const auto& [name, v] : r.metrics) s += fmt::format("{}: {:.6g}\n", name, v);
  if (r.agreement && r.reference_seconds > 0) {
    s += fmt::format("passes: {} {:.2f} s, reference {:.2f} s ({:.2f}x)\n",
                     options.simulates() ? "simulated" : "model", r.model_seconds,
                     r.reference_seconds, r.model_seconds / r.reference_seconds);
  }
  return s;
}

}  // namespace quantkit::pipelines
