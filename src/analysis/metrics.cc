#include "analysis/metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"

namespace quantkit::analysis {
namespace {

int64_t Argmax(const float* row, int64_t width) { return std::max_element(row, row + width) - row; }

Status CheckLabels(const MetricBatch& b, const char* metric) {
  QK_RETURN_IF_NOT(b.labels != nullptr, StatusCode::kInvalidArgument,
                   "metric '{}' needs labelled data (use 'agreement' or 'rel_mse' without labels)",
                   metric);
  for (int64_t i = 0; i < b.batch; ++i) {
    QK_RETURN_IF_NOT(b.labels[i] >= 0 && b.labels[i] < b.width, StatusCode::kInvalidArgument,
                     "label {} is outside the model's {} classes", b.labels[i], b.width);
  }
  return Status::Ok();
}

}  // namespace

Status Top1Metric::Update(const MetricBatch& b) {
  QK_RETURN_IF_ERROR(CheckLabels(b, "top1"));
  for (int64_t i = 0; i < b.batch; ++i) {
    hits_ += Argmax(b.output + i * b.width, b.width) == b.labels[i] ? 1 : 0;
  }
  total_ += b.batch;
  return Status::Ok();
}

Status Top5Metric::Update(const MetricBatch& b) {
  QK_RETURN_IF_ERROR(CheckLabels(b, "top5"));
  for (int64_t i = 0; i < b.batch; ++i) {
    const float* row = b.output + i * b.width;
    const float at_label = row[b.labels[i]];
    int64_t better = 0;
    for (int64_t c = 0; c < b.width; ++c) better += row[c] > at_label ? 1 : 0;
    hits_ += better < 5 ? 1 : 0;
  }
  total_ += b.batch;
  return Status::Ok();
}

Status OutputErrorMetric::Update(const MetricBatch& b) {
  QK_RETURN_IF_NOT(b.reference != nullptr, StatusCode::kInvalidArgument,
                   "metric 'output_error' compares with a reference");
  stats_.Add(b.output, b.reference, b.batch * b.width);
  return Status::Ok();
}

std::vector<double> OutputErrorMetric::State() const {
  std::vector<double> s;
  stats_.AppendState(&s);
  return s;
}

void OutputErrorMetric::AddState(const std::vector<double>& s) {
  stats_.Merge(ErrorStats::FromState(s.data()));
}

Status AgreementMetric::Update(const MetricBatch& b) {
  for (int64_t i = 0; i < b.batch; ++i) {
    hits_ += Argmax(b.output + i * b.width, b.width) == Argmax(b.reference + i * b.width, b.width);
  }
  total_ += b.batch;
  return Status::Ok();
}

Status FrameAgreementMetric::Update(const MetricBatch& b) {
  const int64_t classes = b.classes > 0 ? b.classes : b.width;
  QK_RETURN_IF_NOT(classes > 0 && b.width % classes == 0, StatusCode::kInvalidArgument,
                   "metric 'frame_agreement': {} values per sample are not frames of {} classes",
                   b.width, classes);
  QK_RETURN_IF_NOT(
      b.width / classes > 1, StatusCode::kInvalidArgument,
      "metric 'frame_agreement' compares the frames of a [batch, time, classes] sequence, and this "
      "output is one frame of {} values per sample (a class vector): use agreement, or top1 with "
      "labels",
      classes);
  const int64_t frames = b.batch * (b.width / classes);
  for (int64_t f = 0; f < frames; ++f) {
    hits_ += Argmax(b.output + f * classes, classes) == Argmax(b.reference + f * classes, classes);
  }
  total_ += frames;
  return Status::Ok();
}

Status DecodeAgreementMetric::Update(const MetricBatch& b) {
  const int64_t classes = b.classes > 0 ? b.classes : b.width;
  QK_RETURN_IF_NOT(
      classes > 1 && b.width % classes == 0, StatusCode::kInvalidArgument,
      "metric 'decode_agreement': {} values per sample are not frames of {} classes (blank 0 and at "
      "least one symbol)",
      b.width, classes);
  QK_RETURN_IF_NOT(
      b.width / classes > 1, StatusCode::kInvalidArgument,
      "metric 'decode_agreement' decodes a [batch, time, classes] CTC sequence, and this output is "
      "one frame of {} values per sample (a class vector): use agreement, or top1 with labels",
      classes);
  const int64_t frames = b.width / classes;
  for (int64_t i = 0; i < b.batch; ++i) {
    // Both decodes in full, then compared: they may differ in length.
    const float* out = b.output + i * b.width;
    const float* ref = b.reference + i * b.width;
    int64_t out_prev = 0, ref_prev = 0;
    std::vector<int64_t> out_labels, ref_labels;
    for (int64_t f = 0; f < frames; ++f) {
      const int64_t o = Argmax(out + f * classes, classes), r = Argmax(ref + f * classes, classes);
      if (o != 0 && o != out_prev) out_labels.push_back(o);
      if (r != 0 && r != ref_prev) ref_labels.push_back(r);
      out_prev = o;
      ref_prev = r;
    }
    hits_ += out_labels == ref_labels ? 1 : 0;
  }
  total_ += b.batch;
  return Status::Ok();
}

Status RelativeMseMetric::Update(const MetricBatch& b) {
  for (int64_t i = 0; i < b.batch * b.width; ++i) {
    const double e = static_cast<double>(b.output[i]) - b.reference[i];
    err2_ += e * e;
    ref2_ += static_cast<double>(b.reference[i]) * b.reference[i];
  }
  return Status::Ok();
}

Result<std::unique_ptr<Metric>> MakeMetric(const std::string& name) {
  if (name == "top1") return std::unique_ptr<Metric>(new Top1Metric());
  if (name == "agreement") return std::unique_ptr<Metric>(new AgreementMetric());
  if (name == "rel_mse" || name == "rel-mse")
    return std::unique_ptr<Metric>(new RelativeMseMetric());
  if (name == "frame_agreement") return std::unique_ptr<Metric>(new FrameAgreementMetric());
  if (name == "decode_agreement") return std::unique_ptr<Metric>(new DecodeAgreementMetric());
  return MakeStatus(
      StatusCode::kInvalidArgument,
      "unknown metric '{}' (built in: top1, agreement, rel_mse, frame_agreement, decode_agreement)",
      name);
}

// The order is stored: QAT checkpoints record their validation metric as an index into this
// list (pipelines/qat/loop.cc, "val_metric"). Append new names; never reorder.
std::vector<std::string> BuiltinMetricNames() {
  return {"top1", "agreement", "rel_mse", "frame_agreement", "decode_agreement"};
}

Result<std::vector<std::unique_ptr<Metric>>> MakeMetrics(const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<Metric>> out;
  for (const std::string& n : names) {
    QK_ASSIGN_OR_RETURN(std::unique_ptr<Metric> m, MakeMetric(n));
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Metric*> MetricPointers(const std::vector<std::unique_ptr<Metric>>& metrics) {
  std::vector<Metric*> out;
  for (const auto& m : metrics) out.push_back(m.get());
  return out;
}

std::string DefaultMetricName(bool has_labels, bool class_output) {
  if (!class_output) return "rel_mse";
  return has_labels ? "top1" : "agreement";
}

bool IsClassOutput(const std::vector<int64_t>& dims) { return dims.size() == 2 && dims[1] >= 2; }

bool IsNormalisedEmbedding(const ir::Graph& graph) {
  if (graph.outputs().empty()) return false;
  const ir::Node* node = graph.outputs()[0]->producer();
  // Shape-only ops between the normalisation and the output change no value.
  for (int hops = 0; node && hops < 16; ++hops) {
    const std::string& op = node->op_type();
    if (op == "LpNormalization" || op == "Div") return true;
    if (op != "Identity" && op != "Reshape" && op != "Flatten" && op != "Squeeze" &&
        op != "Unsqueeze" && op != "Cast") {
      return false;
    }
    node = node->input(0) ? node->input(0)->producer() : nullptr;
  }
  return false;
}

Result<std::unique_ptr<Metric>> MakeOutputAwareMetric(const std::string& given, bool has_labels,
                                                      bool class_output) {
  return MakeMetric(given.empty() ? DefaultMetricName(has_labels, class_output) : given);
}

void ErrorStats::Add(const float* out, const float* ref, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double o = out[i], r = ref[i], e = o - r;
    err2 += e * e;
    ref2 += r * r;
    out2 += o * o;
    dot += o * r;
    max_abs = std::max(max_abs, std::fabs(e));
  }
  count += n;
}

void ErrorStats::Merge(const ErrorStats& o) {
  err2 += o.err2;
  ref2 += o.ref2;
  out2 += o.out2;
  dot += o.dot;
  max_abs = std::max(max_abs, o.max_abs);
  count += o.count;
}

void ErrorStats::AppendState(std::vector<double>* out) const {
  out->insert(out->end(), {err2, ref2, out2, dot, max_abs, static_cast<double>(count)});
}

ErrorStats ErrorStats::FromState(const double* v) {
  ErrorStats e;
  e.err2 = v[0], e.ref2 = v[1], e.out2 = v[2], e.dot = v[3], e.max_abs = v[4];
  e.count = static_cast<int64_t>(v[5]);  // exact: counts stay far below 2^53
  return e;
}

double ErrorStats::sqnr_db() const {
  if (err2 == 0) return INFINITY;
  return ref2 > 0 ? 10.0 * std::log10(ref2 / err2) : -INFINITY;
}

double ErrorStats::cosine() const {
  if (ref2 == 0 && out2 == 0) return 1.0;
  return dot / std::max(std::sqrt(ref2 * out2), 1e-300);
}

double ErrorStats::relative_mse() const {
  if (ref2 == 0) return err2 > 0 ? INFINITY : 0.0;
  return err2 / ref2;
}

}  // namespace quantkit::analysis
