#include "quant/collectors/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "quant/collectors/scan.h"
#include "quant/reference_histograms.h"

namespace quantkit::quant {
namespace {

// Exponent e of the smallest power of two strictly greater than a (a finite, >= 0), >=
// kMinRangeExp.
int RangeExpFor(float a) {
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): a < 2^e <= 2a
  return std::max(e, kMinRangeExp);
}

// Merges 2^d adjacent bins of `v` into one, in place (exact integer sums).
void Coarsen(std::vector<int64_t>* v, int d) {
  const size_t n = v->size();
  if (d <= 0) return;
  if (d >= 63 || (size_t{1} << d) >= n) {
    int64_t total = 0;
    for (int64_t c : *v) total += c;
    std::fill(v->begin(), v->end(), 0);
    (*v)[0] = total;
    return;
  }
  const size_t group = size_t{1} << d;
  for (size_t j = 0; j < n / group; ++j) {
    int64_t s = 0;
    for (size_t i = 0; i < group; ++i) s += (*v)[j * group + i];
    (*v)[j] = s;
  }
  std::fill(v->begin() + static_cast<std::ptrdiff_t>(n / group), v->end(), 0);
}

}  // namespace

StreamingHistogram::StreamingHistogram(int log2_bins) : log2_bins_(log2_bins) {
  QK_CHECK(log2_bins >= kMinStreamLog2Bins && log2_bins <= kMaxStreamLog2Bins,
           "log2_bins {} out of range", log2_bins);
  pos_.assign(static_cast<size_t>(bins_per_sign()), 0);
  neg_.assign(static_cast<size_t>(bins_per_sign()), 0);
}

double StreamingHistogram::bin_width() const { return std::ldexp(1.0, range_exp_ - log2_bins_); }

int64_t StreamingHistogram::binned_count() const {
  int64_t total = zeros_;
  for (size_t k = 0; k < pos_.size(); ++k) total += pos_[k] + neg_[k];
  return total;
}

void StreamingHistogram::GrowTo(int new_exp) {
  if (!has_range_) {
    has_range_ = true;
    range_exp_ = new_exp;
    return;
  }
  if (new_exp <= range_exp_) return;
  Coarsen(&pos_, new_exp - range_exp_);
  Coarsen(&neg_, new_exp - range_exp_);
  range_exp_ = new_exp;
}

void StreamingHistogram::Observe(FloatSpan values) { ObserveAndSummarize(values); }

scan::Summary StreamingHistogram::ObserveAndSummarize(FloatSpan values) {
  // Usually one pass: values that fit the current range are binned while they are summarised
  // (scan::SummarizeAndBin). The rest (the first batch, a batch that widens the range, NaN/Inf)
  // is binned after the range has grown to the batch's largest finite |x| — the same histogram
  // as binning everything at the final range (docs/histogram-policy.md). The bin of a value
  // depends only on the value and the range (exact power-of-two scaling).
  std::vector<FloatSpan> rest;
  scan::Summary s;
  if (has_range_) {
    s = scan::SummarizeAndBin(values, log2_bins_, range_exp_, pos_.data(), neg_.data(), &zeros_,
                              &rest);
  } else {
    s = scan::Summarize(values);
    if (values.size > 0) rest.push_back(values);
  }
  const float amax = std::max(std::fabs(s.min), std::fabs(s.max));
  const bool any_finite = s.min <= s.max;
  if (any_finite && amax > 0.0f) GrowTo(RangeExpFor(amax));
  for (const FloatSpan& span : rest) {
    if (!s.nonfinite) {
      scan::BinFinite(span, amax, log2_bins_, range_exp_, pos_.data(), neg_.data(), &zeros_);
    } else {
      BinWithNonFinite(span);
    }
  }
  return s;
}

void StreamingHistogram::BinWithNonFinite(FloatSpan values) {
  // Rare: NaN/Inf present. They are counted apart and never binned.
  const int64_t n = bins_per_sign();
  const double scale = std::ldexp(1.0, log2_bins_ - range_exp_);
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++nonfinite_;
      continue;
    }
    const int64_t k = static_cast<int64_t>(std::fabs(static_cast<double>(v)) * scale);
    if (v > 0.0f)
      ++pos_[static_cast<size_t>(std::min(k, n - 1))];
    else if (v < 0.0f)
      ++neg_[static_cast<size_t>(std::min(k, n - 1))];
    else
      ++zeros_;
  }
}

void StreamingHistogram::Merge(const StreamingHistogram& other) {
  QK_CHECK(other.log2_bins_ == log2_bins_, "merging histograms with {} and {} fine bins",
           other.log2_bins_, log2_bins_);
  zeros_ += other.zeros_;
  nonfinite_ += other.nonfinite_;
  if (!other.has_range_) return;
  GrowTo(other.range_exp_);
  std::vector<int64_t> op = other.pos_, on = other.neg_;
  Coarsen(&op, range_exp_ - other.range_exp_);
  Coarsen(&on, range_exp_ - other.range_exp_);
  for (size_t k = 0; k < pos_.size(); ++k) {
    pos_[k] += op[k];
    neg_[k] += on[k];
  }
}

Histogram StreamingHistogram::RebinAbs(int64_t num_bins, float amax) const {
  Histogram h;
  h.counts.assign(static_cast<size_t>(num_bins), 0);
  h.edges = NumpyUniformEdgesF32(0.0f, amax > 0 ? amax : 1.0f, num_bins);
  const double w = bin_width();
  const int64_t last = num_bins - 1;
  for (size_t k = 0; k < pos_.size(); ++k) {
    const int64_t c = pos_[k] + neg_[k];
    if (c == 0) continue;
    const double centre = (static_cast<double>(k) + 0.5) * w;
    // Same edge rule as numpy, centres beyond the last edge go to the last bin.
    auto it = std::upper_bound(h.edges.begin(), h.edges.end(), centre);
    int64_t bin = static_cast<int64_t>(it - h.edges.begin()) - 1;
    h.counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, last))] += c;
  }
  h.counts[0] += zeros_;
  h.observed_min = 0.0;
  h.observed_max = amax;
  return h;
}

Histogram StreamingHistogram::RebinSigned(int64_t num_bins, float t) const {
  Histogram h;
  h.counts.assign(static_cast<size_t>(num_bins), 0);
  const float tt = t > 0 ? t : 1.0f;
  h.edges = NumpyUniformEdgesF32(-tt, tt, num_bins);
  const double w = bin_width();
  const int64_t last = num_bins - 1;
  auto add = [&](double value, int64_t c) {
    auto it = std::upper_bound(h.edges.begin(), h.edges.end(), value);
    int64_t bin = static_cast<int64_t>(it - h.edges.begin()) - 1;
    h.counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, last))] += c;
  };
  for (size_t k = 0; k < pos_.size(); ++k) {
    const double centre = (static_cast<double>(k) + 0.5) * w;
    if (pos_[k] != 0) add(centre, pos_[k]);
    if (neg_[k] != 0) add(-centre, neg_[k]);
  }
  if (zeros_ != 0) add(0.0, zeros_);
  return h;
}

Histogram StreamingHistogram::FineAbsHistogram() const {
  // Keep bins up to the last non-empty one.
  int64_t used = 1;
  for (int64_t k = bins_per_sign() - 1; k >= 0; --k) {
    if (pos_[static_cast<size_t>(k)] + neg_[static_cast<size_t>(k)] != 0) {
      used = k + 1;
      break;
    }
  }
  Histogram h;
  h.counts.resize(static_cast<size_t>(used));
  h.edges.resize(static_cast<size_t>(used) + 1);
  const double w = bin_width();
  for (int64_t k = 0; k < used; ++k) {
    h.counts[static_cast<size_t>(k)] = pos_[static_cast<size_t>(k)] + neg_[static_cast<size_t>(k)];
    h.edges[static_cast<size_t>(k)] = static_cast<double>(k) * w;
  }
  h.edges[static_cast<size_t>(used)] = static_cast<double>(used) * w;
  h.counts[0] += zeros_;
  // Power-of-two multiples are exact in float32 unless beyond its range; say float64 to be safe.
  h.edge_dtype = EdgeDType::kFloat64;
  return h;
}

Result<StreamingHistogram> StreamingHistogram::FromParts(int log2_bins, bool has_range,
                                                         int range_exp,
                                                         std::vector<int64_t> positive,
                                                         std::vector<int64_t> negative,
                                                         int64_t zeros, int64_t nonfinite) {
  if (log2_bins < kMinStreamLog2Bins || log2_bins > kMaxStreamLog2Bins) {
    return Status(StatusCode::kInvalidModel,
                  "histogram log2_bins " + std::to_string(log2_bins) + " out of range");
  }
  StreamingHistogram h(log2_bins);
  const size_t n = static_cast<size_t>(h.bins_per_sign());
  if (positive.size() != n || negative.size() != n) {
    return Status(StatusCode::kInvalidModel, "histogram bin arrays have the wrong length");
  }
  if (has_range && (range_exp < kMinRangeExp || range_exp > kMaxRangeExp)) {
    return Status(StatusCode::kInvalidModel,
                  "histogram range_exp " + std::to_string(range_exp) + " out of range");
  }
  for (size_t k = 0; k < n; ++k) {
    if (positive[k] < 0 || negative[k] < 0) {
      return Status(StatusCode::kInvalidModel, "histogram has a negative count");
    }
  }
  if (zeros < 0 || nonfinite < 0) {
    return Status(StatusCode::kInvalidModel, "histogram has a negative count");
  }
  // Nothing is binned before a range exists: bins without one would be read at a scale nobody
  // chose.
  if (!has_range &&
      (std::any_of(positive.begin(), positive.end(), [](int64_t c) { return c != 0; }) ||
       std::any_of(negative.begin(), negative.end(), [](int64_t c) { return c != 0; }))) {
    return Status(StatusCode::kInvalidModel, "histogram bins without a range");
  }
  h.has_range_ = has_range;
  h.range_exp_ = has_range ? range_exp : kMinRangeExp;
  h.pos_ = std::move(positive);
  h.neg_ = std::move(negative);
  h.zeros_ = zeros;
  h.nonfinite_ = nonfinite;
  return h;
}

bool StreamingHistogram::operator==(const StreamingHistogram& o) const {
  return log2_bins_ == o.log2_bins_ && has_range_ == o.has_range_ &&
         (!has_range_ || range_exp_ == o.range_exp_) && pos_ == o.pos_ && neg_ == o.neg_ &&
         zeros_ == o.zeros_ && nonfinite_ == o.nonfinite_;
}

double ShareAbove(const StreamingHistogram& h, double threshold) {
  const int64_t total = h.binned_count();
  if (total == 0 || h.empty_range()) return 0.0;
  const double w = h.bin_width();
  double above = 0.0;
  const int64_t bins = h.bins_per_sign();
  for (int64_t k = 0; k < bins; ++k) {
    if (static_cast<double>(k) * w < threshold) continue;
    above += static_cast<double>(h.positive()[static_cast<size_t>(k)] +
                                 h.negative()[static_cast<size_t>(k)]);
  }
  return above / static_cast<double>(total);
}

}  // namespace quantkit::quant
