#include "pipelines/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "common/check.h"
#include "common/progress.h"
#include "data/source.h"
#include "onnx/import.h"
#include "runtime/interpreter.h"

namespace quantkit::pipelines {
namespace {

// Evaluation compares first outputs: a model without graph outputs has nothing to evaluate.
Result<std::unique_ptr<runtime::Interpreter>> Load(const std::string& path) {
  QK_ASSIGN_OR_RETURN(ir::Model model, onnx_io::ImportModel(path));
  QK_RETURN_IF_NOT(!model.graph->outputs().empty(), StatusCode::kInvalidModel,
                   "{}: the model has no graph outputs, nothing to evaluate", path);
  return runtime::Interpreter::Create(std::move(model));
}

// Rows of a [B, C] float output (any trailing dims flattened into C).
struct Rows {
  const float* data = nullptr;
  int64_t batch = 0;
  int64_t width = 0;
};

Result<Rows> AsRows(const std::vector<runtime::NamedTensor>& outs, int64_t batch) {
  QK_RETURN_IF_NOT(!outs.empty(), StatusCode::kInvalidModel, "the model produced no outputs");
  const runtime::NamedTensor& out = outs.front();
  QK_RETURN_IF_NOT(out.tensor.dtype() == ir::DType::kFloat && out.tensor.rank() >= 1 &&
                       out.tensor.dims()[0] == batch,
                   StatusCode::kInvalidArgument,
                   "output '{}' is not a float [batch, ...] tensor (dtype {}, rank {})", out.name,
                   ir::DTypeName(out.tensor.dtype()), out.tensor.rank());
  return Rows{out.tensor.data_as<float>(), batch, batch ? out.tensor.numel() / batch : 0};
}

}  // namespace

Result<EvalResult> Evaluate(const EvalOptions& options) {
  QK_RETURN_IF_NOT(options.batch_size > 0, StatusCode::kInvalidArgument, "--batch-size must be positive");
  std::unique_ptr<runtime::Interpreter> interpreter, reference;
  if (!options.plan.empty()) {
    QK_ASSIGN_OR_RETURN(quant::QuantPlan plan, analysis::ReadPlanFile(options.plan));
    QK_ASSIGN_OR_RETURN(ir::Model simulated, analysis::BuildSimulationModel(options.model, plan, options.simulation));
    QK_ASSIGN_OR_RETURN(interpreter, runtime::Interpreter::Create(std::move(simulated)));
    QK_ASSIGN_OR_RETURN(reference, Load(options.reference_model.empty() ? options.model : options.reference_model));
  } else {
    QK_ASSIGN_OR_RETURN(interpreter, Load(options.model));
    if (!options.reference_model.empty()) {
      QK_ASSIGN_OR_RETURN(reference, Load(options.reference_model));
    }
  }
  QK_RETURN_IF_NOT(options.metrics.empty() || reference, StatusCode::kInvalidArgument,
                   "metrics compare with a reference: give --reference or --plan");
  for (analysis::Metric* m : options.metrics) m->Reset();
  QK_ASSIGN_OR_RETURN(std::unique_ptr<data::Source> source,
                      data::OpenSource(options.data, data::ModelInputs(interpreter->model()), options.image));
  source = data::Take(std::move(source), options.samples);
  const int64_t n = source->num_samples();
  EvalResult result;
  result.samples = n;
  int64_t correct1 = 0, correct5 = 0, labelled = 0, agree = 0;
  double dot = 0, norm_out = 0, norm_ref = 0, err2 = 0, max_err = 0;
  Progress progress("eval", n, "samples");
  if (!options.progress) progress.set_enabled(false);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < n; s += options.batch_size) {
    const int64_t count = std::min(options.batch_size, n - s);
    QK_ASSIGN_OR_RETURN(data::Batch batch, source->Read(s, count));
    std::vector<runtime::NamedTensor> feeds;
    for (auto& [name, t] : batch.inputs) feeds.push_back({name, std::move(t)});
    QK_ASSIGN_OR_RETURN(auto outs, interpreter->Run(feeds));
    QK_ASSIGN_OR_RETURN(Rows rows, AsRows(outs, count));
    result.output_width = rows.width;
    if (options.keep_outputs) result.outputs.insert(result.outputs.end(), rows.data, rows.data + count * rows.width);
    for (int64_t b = 0; b < count; ++b) {
      const float* row = rows.data + b * rows.width;
      const int64_t pred = std::max_element(row, row + rows.width) - row;
      result.predictions.push_back(pred);
      if (batch.labels) {
        const int64_t label = batch.labels->data_as<int64_t>()[b];
        QK_RETURN_IF_NOT(label >= 0 && label < rows.width, StatusCode::kInvalidArgument,
                         "sample {}: label {} is outside the model's {} classes", s + b, label, rows.width);
        ++labelled;
        correct1 += pred == label ? 1 : 0;
        // Rank of the label: how many logits beat it (ties count in the label's favour, as
        // argmax picks the first maximum).
        int64_t better = 0;
        for (int64_t c = 0; c < rows.width; ++c) better += row[c] > row[label] ? 1 : 0;
        correct5 += better < 5 ? 1 : 0;
      }
    }
    if (reference) {
      QK_ASSIGN_OR_RETURN(auto ref_outs, reference->Run(feeds));
      QK_ASSIGN_OR_RETURN(Rows ref, AsRows(ref_outs, count));
      QK_RETURN_IF_NOT(ref.width == rows.width, StatusCode::kInvalidArgument,
                       "the reference model's first output has {} values per sample, the model's {}",
                       ref.width, rows.width);
      for (int64_t b = 0; b < count; ++b) {
        const float* r = ref.data + b * ref.width;
        const float* o = rows.data + b * rows.width;
        agree += (std::max_element(r, r + ref.width) - r) == (std::max_element(o, o + rows.width) - o) ? 1 : 0;
        for (int64_t c = 0; c < rows.width; ++c) {
          const double e = static_cast<double>(o[c]) - r[c];
          dot += static_cast<double>(o[c]) * r[c];
          norm_out += static_cast<double>(o[c]) * o[c];
          norm_ref += static_cast<double>(r[c]) * r[c];
          err2 += e * e;
          max_err = std::max(max_err, std::fabs(e));
        }
      }
      const analysis::MetricBatch mb{rows.data, ref.data, count, rows.width,
                           batch.labels ? batch.labels->data_as<int64_t>() : nullptr};
      for (analysis::Metric* m : options.metrics) {
        QK_RETURN_IF_NOT(!m->needs_labels() || mb.labels, StatusCode::kInvalidArgument,
                         "metric '{}' needs labelled data", m->name());
        QK_RETURN_IF_ERROR(m->Update(mb));
      }
    }
    progress.Advance(count);
  }
  progress.Finish();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (labelled > 0) {
    result.top1 = static_cast<double>(correct1) / static_cast<double>(labelled);
    result.top5 = static_cast<double>(correct5) / static_cast<double>(labelled);
  }
  if (reference) {
    Agreement a;
    a.argmax_agreement = n ? static_cast<double>(agree) / static_cast<double>(n) : 0;
    a.cosine = dot / std::max(std::sqrt(norm_out * norm_ref), 1e-300);
    a.sqnr_db = err2 > 0 ? 10.0 * std::log10(norm_ref / err2) : INFINITY;
    a.max_abs_error = max_err;
    result.agreement = a;
  }
  for (analysis::Metric* m : options.metrics) result.metrics[m->name()] = m->Value();
  return result;
}

std::string FormatEval(const EvalOptions& options, const EvalResult& r) {
  std::string s = options.plan.empty() ? "" : fmt::format("plan: {} (simulated INT8)\n", options.plan);
  s += fmt::format("model: {}\ndata: {} ({} samples, {:.2f} s, {:.1f} samples/s)\n",
                              options.model, options.data, r.samples, r.seconds,
                              static_cast<double>(r.samples) / std::max(r.seconds, 1e-9));
  if (r.top1) s += fmt::format("top-1: {:.4f}\ntop-5: {:.4f}\n", *r.top1, *r.top5);
  if (r.agreement) {
    s += fmt::format("vs {}: argmax agreement {:.4f}, cosine {:.6f}, SQNR {:.2f} dB, max |error| {:.4g}\n",
                     options.reference_model.empty() ? options.model + " (FP32)" : options.reference_model,
                     r.agreement->argmax_agreement, r.agreement->cosine,
                     r.agreement->sqnr_db, r.agreement->max_abs_error);
  }
  for (const auto& [name, v] : r.metrics) s += fmt::format("{}: {:.6g}\n", name, v);
  return s;
}

}  // namespace quantkit::pipelines
