// Accuracy metrics of a quantized model against its FP32 twin, computed batch by batch.
//
// A Metric sees, per batch, the first output of the model under test, the FP32 model's output
// for the same samples and the labels when the data has them. Users plug their own in C++:
//
//   class Top2 : public analysis::Metric {
//     std::string name() const override { return "top2"; }
//     ... Reset/Update/Value ...
//   };
//   evaluator->Evaluate(model, {&top1, &my_top2});
//
// Loss() turns a value into "how much worse than FP32" for budgets (fallback search): points
// (x100) for higher-is-better shares, the plain difference otherwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::analysis {

struct MetricBatch {
  const float* output = nullptr;     // [batch, width] of the model under test
  const float* reference = nullptr;  // [batch, width] of the FP32 model
  int64_t batch = 0;
  int64_t width = 0;
  const int64_t* labels = nullptr;  // [batch], or nullptr without labels
  int64_t classes = 0;              // the output's last axis (frames are its rows); 0: unknown
};

class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  virtual void Reset() = 0;
  virtual Status Update(const MetricBatch& batch) = 0;
  virtual double Value() const = 0;
  virtual bool higher_is_better() const { return true; }
  virtual bool needs_labels() const { return false; }
  // Exact combination over batches and processes (eval as N processes): the running state as
  // numbers (counts, sums; fixed length per metric), and AddState adds such a state into this
  // one. Evaluate keeps one state per batch and adds them in sample order, so the value does not
  // depend on how the samples were split. Metrics that return {} run in one process only.
  virtual std::vector<double> State() const { return {}; }
  virtual void AddState(const std::vector<double>& /*state*/) {}
  // How much worse `value` is than the FP32 model's `fp32_value` (>= 0 when worse).
  virtual double Loss(double value, double fp32_value) const {
    return higher_is_better() ? 100.0 * (fp32_value - value) : value - fp32_value;
  }
};

// A share of counted items (samples, frames) that pass a test: hits / total, added exactly over
// batches and processes.
class ShareMetric : public Metric {
 public:
  void Reset() override { hits_ = total_ = 0; }
  std::vector<double> State() const override {
    return {static_cast<double>(hits_), static_cast<double>(total_)};
  }
  void AddState(const std::vector<double>& s) override {
    hits_ += static_cast<int64_t>(s.at(0));
    total_ += static_cast<int64_t>(s.at(1));
  }
  double Value() const override {
    return total_ ? static_cast<double>(hits_) / static_cast<double>(total_) : 0.0;
  }
  int64_t total() const { return total_; }  // the items counted (0: none, e.g. no labels)

 protected:
  int64_t hits_ = 0, total_ = 0;
};

// Share of samples whose argmax equals the label (needs labels; a label outside the output's
// classes is an error).
class Top1Metric final : public ShareMetric {
 public:
  std::string name() const override { return "top1"; }
  bool needs_labels() const override { return true; }
  Status Update(const MetricBatch& b) override;
};

// Share of samples whose label is among the 5 highest outputs: fewer than 5 outputs beat the
// label's (ties count in the label's favour, as argmax takes the first maximum). Needs labels.
class Top5Metric final : public ShareMetric {
 public:
  std::string name() const override { return "top5"; }
  bool needs_labels() const override { return true; }
  Status Update(const MetricBatch& b) override;
};

// "Output agreement": share of samples whose argmax equals the FP32 model's argmax.
class AgreementMetric final : public ShareMetric {
 public:
  std::string name() const override { return "agreement"; }
  Status Update(const MetricBatch& b) override;
};

// "Frame agreement": share of frames (rows of the output's last axis: the time steps of a
// [batch, time, classes] sequence) whose argmax equals the FP32 model's. What a greedy decode
// reads: on the PP-OCRv4 recognizer, rel_mse of the softmax output fell 10% under QAT while exact
// match fell 17 points (docs/qat.md). An output of one frame per sample (a [batch, classes] class
// vector) is refused: there `agreement` is the metric, and a 1.0 here would read as a sequence's.
class FrameAgreementMetric final : public ShareMetric {
 public:
  std::string name() const override { return "frame_agreement"; }
  Status Update(const MetricBatch& b) override;
};

// "Decode agreement": share of samples whose greedy CTC decode (each frame's argmax, repeats
// collapsed, the blank class 0 dropped: PP-OCR's and torch.nn.CTCLoss's default blank) equals the
// FP32 model's. What a CTC recognizer's user compares: on PP-OCRv4 rec, 2.5% of the frames of
// 64 crops differed from FP32 (blanks, repeats) where 0.2% of 500 crops' decodes did (docs/qat.md).
class DecodeAgreementMetric final : public ShareMetric {
 public:
  std::string name() const override { return "decode_agreement"; }
  Status Update(const MetricBatch& b) override;
};

// Relative MSE of the outputs: sum (out - ref)^2 / sum ref^2 (0 = identical).
class RelativeMseMetric final : public Metric {
 public:
  std::string name() const override { return "rel_mse"; }
  bool higher_is_better() const override { return false; }
  void Reset() override { err2_ = ref2_ = 0; }
  Status Update(const MetricBatch& b) override;
  std::vector<double> State() const override {
    return {static_cast<double>(err2_), static_cast<double>(ref2_)};
  }
  void AddState(const std::vector<double>& s) override {
    err2_ += static_cast<decltype(err2_)>(s.at(0));
    ref2_ += static_cast<decltype(ref2_)>(s.at(1));
  }
  double Value() const override { return ref2_ > 0 ? err2_ / ref2_ : (err2_ > 0 ? INFINITY : 0.0); }

 private:
  double err2_ = 0, ref2_ = 0;
};

// Built-in metrics by name: "top1", "agreement", "rel_mse" (also "rel-mse"), "frame_agreement",
// "decode_agreement".
Result<std::unique_ptr<Metric>> MakeMetric(const std::string& name);
std::vector<std::string> BuiltinMetricNames();
// MakeMetric for each name, in order (the first unknown name is the error).
Result<std::vector<std::unique_ptr<Metric>>> MakeMetrics(const std::vector<std::string>& names);
std::vector<Metric*> MetricPointers(const std::vector<std::unique_ptr<Metric>>& metrics);
// What a search or a method comparison optimises when the user names no metric. Argmax metrics
// only fit a class vector ([batch, classes] logits): there top-1 when the data has labels, argmax
// agreement with FP32 otherwise. Any other output (a [B,1] score, a CTC sequence, a detection or
// segmentation map) gets rel_mse, the output error: argmax over a flattened map or a single
// score reports "no loss" while the output is ruined.
std::string DefaultMetricName(bool has_labels, bool class_output);
// Whether a first output of these dims is a class vector: [batch, classes] with classes >= 2.
bool IsClassOutput(const std::vector<int64_t>& dims);
// Whether the graph's first output is normalised (LpNormalization, or x / ||x||: a Div), through
// shape-only ops: an embedding, whose argmax means nothing (a sentence encoder's [batch, 384]
// once scored "81% agreement" while retrieval agreed on 79%). Judged by rel MSE instead.
bool IsNormalisedEmbedding(const ir::Graph& graph);
// The metric a workflow optimises: the built-in `given`, or DefaultMetricName when it is empty.
// An unknown name is kInvalidArgument. The one rule of analyze, fallback and qat.
Result<std::unique_ptr<Metric>> MakeOutputAwareMetric(const std::string& given, bool has_labels,
                                                      bool class_output);

// Error statistics of a tensor against its FP32 value, accumulated over batches.
struct ErrorStats {
  double err2 = 0, ref2 = 0, out2 = 0, dot = 0, max_abs = 0;
  int64_t count = 0;

  void Add(const float* out, const float* ref, int64_t n);
  // Adds another part's statistics (sums add, max_abs takes the max). Parts added in a fixed
  // order (batch order) give the same bits however the batches were spread over processes.
  void Merge(const ErrorStats& other);
  // The statistics as kStateSize numbers (err2, ref2, out2, dot, max_abs, count) and back: how a
  // batch's part travels between processes (analysis/plan_eval.h).
  static constexpr size_t kStateSize = 6;
  void AppendState(std::vector<double>* out) const;
  static ErrorStats FromState(const double* state);
  double sqnr_db() const;       // 10 log10(sum ref^2 / sum err^2); +inf when exact
  double cosine() const;        // 1 when both are all zero
  double relative_mse() const;  // sum err^2 / sum ref^2
};

// ErrorStats of the outputs against the reference, as a metric (eval's cosine, SQNR and max
// |error|): Value() is the relative MSE; stats() has the rest. Its state adds exactly (sums, and
// the max of max |error|).
class OutputErrorMetric final : public Metric {
 public:
  std::string name() const override { return "output_error"; }
  bool higher_is_better() const override { return false; }
  void Reset() override { stats_ = ErrorStats(); }
  Status Update(const MetricBatch& b) override;
  std::vector<double> State() const override;
  void AddState(const std::vector<double>& s) override;
  double Value() const override { return stats_.relative_mse(); }
  const ErrorStats& stats() const { return stats_; }

 private:
  ErrorStats stats_;
};

}  // namespace quantkit::analysis
