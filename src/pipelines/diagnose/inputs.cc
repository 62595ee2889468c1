#include "pipelines/diagnose/inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string_view>

#include "common/check.h"

namespace quantkit::pipelines {
namespace {

// Thresholds, named once (docs/diagnose.md explains each).
constexpr double kNoiseCorrelation = 0.2;  // natural images have adjacent-pixel corr >> 0.5
constexpr double kLayoutLagRatio = 0.5;    // |x[w]-x[w+C]| < this * |x[w]-x[w+1]|: HWC order
constexpr double kScaleRatioLow = 0.8, kScaleRatioHigh = 1.25;  // std ratio counted as "same"
constexpr double kShiftInStd = 0.25;        // mean difference, in reference std, counted as shift
constexpr double kChannelTolerance = 0.25;  // of the spread of the reference channel means
constexpr double kDuplicateShare = 0.01;    // duplicated samples above this share: warning

// Channel axis of one sample: CHW when the first dim is small (<= 4) and smaller than the last,
// HWC when the last is; none for rank < 3.
int64_t GuessChannelAxis(const std::vector<int64_t>& dims) {
  if (dims.size() != 3) return -1;
  if (dims[0] <= 4 && dims[0] < dims[2]) return 0;
  if (dims[2] <= 4 && dims[2] < dims[0]) return 2;
  return -1;
}

std::string JoinDoubles(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.4g}", i ? "/" : "", v[i]);
  return s;
}

void Add(std::vector<Finding>* out, std::string code, std::string severity, std::string subject,
         std::string message) {
  out->push_back({std::move(code), std::move(severity), std::move(subject), std::move(message)});
}

}  // namespace

std::string ClassifyScale(double min, double max, double mean, double std) {
  if (min >= 0 && max <= 1.0 + 1e-6) return "0-1";
  if (min >= 0 && max > 10.0 && max <= 255.5) return "0-255";
  if (min < 0 && std::fabs(mean) < 1.5 && std > 0.2 && std < 5.0) return "normalized";
  return "other";
}

Status InputStatsAccumulator::Add(const ir::Tensor& batch) {
  if (batch.dtype() != ir::DType::kFloat || batch.rank() < 1) return Status::Ok();
  const int64_t b = batch.dims()[0];
  if (b == 0) return Status::Ok();
  Batch out;
  out.sample_dims.assign(batch.dims().begin() + 1, batch.dims().end());
  const std::vector<int64_t>& dims = out.sample_dims;
  out.channel_axis = GuessChannelAxis(dims);
  const int64_t axis = out.channel_axis;
  const int64_t channels = axis < 0 ? 1 : dims[static_cast<size_t>(axis)];
  const int64_t per = batch.numel() / b;
  if (per == 0) return Status::Ok();
  out.per_channel_count = per / channels;
  out.ch_sum.assign(static_cast<size_t>(b * channels), 0.0);
  out.ch_sumsq.assign(static_cast<size_t>(b * channels), 0.0);
  const int64_t w = dims.empty() ? 1 : dims.back();
  // Elements per channel block and the stride pattern: CHW -> channel = i / (H*W); HWC -> i % C.
  const int64_t plane = axis == 0 ? per / channels : 1;
  const float* base = batch.data_as<float>();
  for (int64_t s = 0; s < b; ++s) {
    const float* x = base + s * per;
    double* ch_sum = out.ch_sum.data() + s * channels;  // this sample's own sums
    double* ch_sumsq = out.ch_sumsq.data() + s * channels;
    double sum = 0, sumsq = 0;
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < per; ++i) {
      const double v = x[i];
      sum += v;
      sumsq += v * v;
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
      const int64_t c = axis == 0 ? i / plane : (axis == 2 ? i % channels : 0);
      ch_sum[c] += v;
      ch_sumsq[c] += v * v;
    }
    out.min = s == 0 ? lo : std::min<double>(out.min, lo);
    out.max = s == 0 ? hi : std::max<double>(out.max, hi);
    const double mean = sum / static_cast<double>(per);
    const double var = std::max(0.0, sumsq / static_cast<double>(per) - mean * mean);
    out.sample_mean.push_back(mean);
    out.sample_std.push_back(std::sqrt(var));
    out.sample_hash.push_back(std::hash<std::string_view>()(std::string_view(
        reinterpret_cast<const char*>(x), static_cast<size_t>(per) * sizeof(float))));
    if (lo == hi) {
      ++out.constant_samples;
      continue;
    }
    // Spatial structure along the last axis (skipped for HWC, whose last axis is channels).
    double m4 = 0, m2 = 0;
    for (int64_t i = 0; i < per; ++i) {
      const double d = x[i] - mean;
      m2 += d * d;
      m4 += d * d * d * d;
    }
    out.kurtosis.push_back(m2 > 0 ? m4 * static_cast<double>(per) / (m2 * m2) - 3.0 : 0.0);
    if (axis == 2 || w < 4) continue;
    const int64_t lag_c = std::max<int64_t>(channels, 1);
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, d1 = 0, dc = 0;
    int64_t n1 = 0, nc = 0;
    for (int64_t row = 0; row < per / w; ++row) {
      const float* r = x + row * w;
      for (int64_t j = 0; j + 1 < w; ++j) {
        const double a = r[j], c = r[j + 1];
        sx += a, sy += c, sxx += a * a, syy += c * c, sxy += a * c;
        d1 += std::fabs(a - c);
        ++n1;
        if (j + lag_c < w) {
          dc += std::fabs(a - r[j + lag_c]);
          ++nc;
        }
      }
    }
    const double n = static_cast<double>(n1);
    const double cov = sxy / n - (sx / n) * (sy / n);
    const double vx = sxx / n - (sx / n) * (sx / n), vy = syy / n - (sy / n) * (sy / n);
    out.lag1_corr.push_back(vx > 0 && vy > 0 ? cov / std::sqrt(vx * vy) : 0.0);
    out.lag1_absdiff.push_back(d1 / n);
    out.lagc_absdiff.push_back(nc > 0 ? dc / static_cast<double>(nc) : 0.0);
  }
  batches_.push_back(std::move(out));
  return Status::Ok();
}

Status InputStatsAccumulator::Append(InputStatsAccumulator&& later) {
  QK_RETURN_IF_NOT(later.input_ == input_, StatusCode::kInvalidArgument,
                   "input statistics of '{}' cannot be appended to those of '{}'", later.input_,
                   input_);
  for (Batch& b : later.batches_) batches_.push_back(std::move(b));
  later.batches_.clear();
  return Status::Ok();
}

InputStats InputStatsAccumulator::Finalize() const {
  InputStats s;
  s.input = input_;
  if (batches_.empty()) return s;
  s.sample_dims = batches_.front().sample_dims;
  s.channel_axis = batches_.front().channel_axis;
  const size_t channels = batches_.front().ch_sum.size() / batches_.front().sample_mean.size();
  std::vector<double> ch_sum(channels, 0.0), ch_sumsq(channels, 0.0);
  int64_t ch_count = 0;  // values per channel
  std::vector<double> kurtosis, lag1_corr, lag1_absdiff, lagc_absdiff;
  std::unordered_map<uint64_t, int64_t> seen;
  auto append = [](std::vector<double>* to, const std::vector<double>& from) {
    to->insert(to->end(), from.begin(), from.end());
  };
  bool first = true;
  for (const Batch& b : batches_) {
    // The samples of the first shape only (a decoded state was checked to have its channels).
    const int64_t n = static_cast<int64_t>(b.sample_mean.size());
    if (b.sample_dims != s.sample_dims || b.ch_sum.size() != channels * static_cast<size_t>(n))
      continue;
    // Sample by sample in sample order: the same additions whatever the batching or sharding.
    for (size_t i = 0; i < b.ch_sum.size(); ++i) {
      ch_sum[i % channels] += b.ch_sum[i];
      ch_sumsq[i % channels] += b.ch_sumsq[i];
    }
    ch_count += b.per_channel_count * n;
    s.min = first ? b.min : std::min(s.min, b.min);
    s.max = first ? b.max : std::max(s.max, b.max);
    first = false;
    s.samples += n;
    append(&s.sample_mean, b.sample_mean);
    append(&s.sample_std, b.sample_std);
    for (uint64_t h : b.sample_hash) s.duplicate_samples += seen[h]++ > 0 ? 1 : 0;
    s.constant_samples += b.constant_samples;
    append(&kurtosis, b.kurtosis);
    append(&lag1_corr, b.lag1_corr);
    append(&lag1_absdiff, b.lag1_absdiff);
    append(&lagc_absdiff, b.lagc_absdiff);
  }
  double sum = 0, sumsq = 0;
  const double n = static_cast<double>(std::max<int64_t>(ch_count, 1));
  for (size_t c = 0; c < channels; ++c) {
    const double m = ch_sum[c] / n;
    s.channel_mean.push_back(m);
    s.channel_std.push_back(std::sqrt(std::max(0.0, ch_sumsq[c] / n - m * m)));
    sum += ch_sum[c], sumsq += ch_sumsq[c];
  }
  const int64_t count = ch_count * static_cast<int64_t>(channels);
  if (count > 0) {
    s.mean = sum / static_cast<double>(count);
    s.std = std::sqrt(std::max(0.0, sumsq / static_cast<double>(count) - s.mean * s.mean));
  }
  s.lag1_corr = lag1_corr.empty() ? 0 : Median(lag1_corr);
  s.kurtosis = kurtosis.empty() ? 0 : Median(kurtosis);
  s.lag1_absdiff = lag1_absdiff.empty() ? 0 : Median(lag1_absdiff);
  s.lagc_absdiff = lagc_absdiff.empty() ? 0 : Median(lagc_absdiff);
  s.scale = ClassifyScale(s.min, s.max, s.mean, s.std);
  return s;
}

void InputStatsAccumulator::Encode(ByteWriter* out) const {
  out->PutString(input_);
  out->Put(static_cast<uint32_t>(batches_.size()));
  for (const Batch& b : batches_) {
    out->PutVector(b.sample_dims);
    for (int64_t v : {b.channel_axis, b.per_channel_count, b.constant_samples}) out->Put(v);
    for (double v : {b.min, b.max}) out->Put(v);
    for (const std::vector<double>* v :
         {&b.ch_sum, &b.ch_sumsq, &b.sample_mean, &b.sample_std, &b.kurtosis, &b.lag1_corr,
          &b.lag1_absdiff, &b.lagc_absdiff}) {
      out->PutVector(*v);
    }
    out->PutVector(b.sample_hash);
  }
}

Result<InputStatsAccumulator> InputStatsAccumulator::Decode(ByteReader* in) {
  QK_ASSIGN_OR_RETURN(std::string name, in->GetString("an input name"));
  InputStatsAccumulator acc(name);
  QK_ASSIGN_OR_RETURN(uint32_t batches, in->Get<uint32_t>("the batch count"));
  for (uint32_t i = 0; i < batches; ++i) {
    Batch b;
    QK_ASSIGN_OR_RETURN(b.sample_dims, in->GetVector<int64_t>("sample dims"));
    QK_ASSIGN_OR_RETURN(b.channel_axis, in->Get<int64_t>("the channel axis"));
    QK_ASSIGN_OR_RETURN(b.per_channel_count, in->Get<int64_t>("values per channel"));
    QK_ASSIGN_OR_RETURN(b.constant_samples, in->Get<int64_t>("constant samples"));
    QK_ASSIGN_OR_RETURN(b.min, in->Get<double>("min"));
    QK_ASSIGN_OR_RETURN(b.max, in->Get<double>("max"));
    for (std::vector<double>* v : {&b.ch_sum, &b.ch_sumsq, &b.sample_mean, &b.sample_std,
                                   &b.kurtosis, &b.lag1_corr, &b.lag1_absdiff, &b.lagc_absdiff}) {
      QK_ASSIGN_OR_RETURN(*v, in->GetVector<double>("input statistics"));
    }
    QK_ASSIGN_OR_RETURN(b.sample_hash, in->GetVector<uint64_t>("sample hashes"));
    // What Finalize() indexes must agree, or a garbled state would read out of bounds.
    const size_t n = b.sample_mean.size();
    const bool consistent =
        n > 0 && b.ch_sum.size() == b.ch_sumsq.size() && !b.ch_sum.empty() &&
        b.ch_sum.size() % n == 0 && b.sample_std.size() == n && b.sample_hash.size() == n &&
        b.constant_samples >= 0 && b.constant_samples <= static_cast<int64_t>(n) &&
        b.kurtosis.size() <= n && b.lag1_corr.size() <= n && b.per_channel_count >= 0;
    QK_RETURN_IF_NOT(consistent, StatusCode::kInvalidArgument,
                     "{}: inconsistent statistics of input '{}'", in->source(), name);
    acc.batches_.push_back(std::move(b));
  }
  return acc;
}

Result<InputExpectation> ParseExpectation(const std::string& text) {
  InputExpectation e;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    QK_RETURN_IF_NOT(
        eq != std::string::npos, StatusCode::kInvalidArgument,
        "--expect '{}': '{}' is not KEY=VALUE (range=LO:HI, mean=M[/M..], std=S[/S..])", text,
        item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto parse_list = [&](char sep) -> Result<std::vector<double>> {
      std::vector<double> v;
      size_t p = 0;
      while (p <= value.size()) {
        const size_t q = std::min(value.find(sep, p), value.size());
        const std::string num = value.substr(p, q - p);
        char* end = nullptr;
        const double d = std::strtod(num.c_str(), &end);
        QK_RETURN_IF_NOT(!num.empty() && end && *end == '\0' && std::isfinite(d),
                         StatusCode::kInvalidArgument, "--expect '{}': '{}' is not a number", text,
                         num);
        v.push_back(d);
        p = q + 1;
      }
      return v;
    };
    if (key == "range") {
      QK_ASSIGN_OR_RETURN(std::vector<double> r, parse_list(':'));
      QK_RETURN_IF_NOT(r.size() == 2 && r[0] < r[1], StatusCode::kInvalidArgument,
                       "--expect '{}': range wants LO:HI with LO < HI", text);
      e.has_range = true, e.lo = r[0], e.hi = r[1];
    } else if (key == "mean") {
      QK_ASSIGN_OR_RETURN(e.mean, parse_list('/'));
    } else if (key == "std") {
      QK_ASSIGN_OR_RETURN(e.std, parse_list('/'));
      for (double d : e.std) {
        QK_RETURN_IF_NOT(d > 0, StatusCode::kInvalidArgument, "--expect '{}': std must be > 0",
                         text);
      }
    } else {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("--expect '{}': unknown key '{}' (range, mean, std)", text, key));
    }
  }
  QK_RETURN_IF_NOT(e.mean.empty() || e.std.empty() || e.mean.size() == e.std.size(),
                   StatusCode::kInvalidArgument,
                   "--expect '{}': mean and std need as many channels", text);
  QK_RETURN_IF_NOT(!e.empty(), StatusCode::kInvalidArgument, "--expect '{}': nothing expected",
                   text);
  return e;
}

void CheckInputSet(const InputStats& s, const std::string& label, std::vector<Finding>* out) {
  if (s.samples == 0) return;
  const double n = static_cast<double>(s.samples);
  // Image-like: [C, H, W] or [H, W, C] samples. Audio, feature sequences and states are not, and
  // the image checks (blank loads, adjacent-pixel correlation) would raise false alarms on them.
  const bool image_like = s.sample_dims.size() == 3;
  if (s.constant_samples > 0) {
    Add(out, "constant_samples", image_like ? "warning" : "info", s.input,
        fmt::format("{} of {} {} samples of '{}' are constant (every value {}){}",
                    s.constant_samples, s.samples, label, s.input,
                    s.constant_samples == s.samples ? fmt::format("{:.4g}", s.min) : "the same",
                    image_like ? ": blank or failed loads" : ""));
  }
  if (s.duplicate_samples > 0) {
    const bool many = static_cast<double>(s.duplicate_samples) > kDuplicateShare * n;
    Add(out, "duplicate_samples", many ? "warning" : "info", s.input,
        fmt::format("{} of {} {} samples of '{}' are exact copies of another sample{}",
                    s.duplicate_samples, s.samples, label, s.input,
                    many ? ": the set is smaller than it looks" : ""));
  }
  const bool spatial = image_like && s.sample_dims.back() >= 4 && s.channel_axis != 2 &&
                       s.constant_samples < s.samples;
  // Interleaved channels first: their rows alternate between channels and look uncorrelated.
  if (spatial && s.channel_axis == 0 && s.channel_mean.size() >= 2 && s.lag1_absdiff > 0 &&
      s.lagc_absdiff < kLayoutLagRatio * s.lag1_absdiff) {
    Add(out, "layout_swapped", "warning", s.input,
        fmt::format(
            "{} data for '{}' looks like NHWC (interleaved channels) reshaped to NCHW: values "
            "{} apart along a row agree better than neighbours (mean |diff| {:.4g} vs {:.4g}); "
            "transpose (0,3,1,2) instead of reshaping",
            label, s.input, s.channel_mean.size(), s.lagc_absdiff, s.lag1_absdiff));
  } else if (spatial && std::fabs(s.lag1_corr) < kNoiseCorrelation) {
    const char* kind = s.kurtosis < -0.9             ? "uniform noise"
                       : std::fabs(s.kurtosis) < 0.5 ? "gaussian noise"
                                                     : "uncorrelated values";
    Add(out, "random_data", "warning", s.input,
        fmt::format("{} data for '{}' looks like {}: adjacent values are uncorrelated (median "
                    "correlation {:.3f}, excess kurtosis {:.2f}); real images correlate strongly",
                    label, s.input, kind, s.lag1_corr, s.kurtosis));
  }
}

void CompareInputSets(const InputStats& d, const std::string& dl, const InputStats& r,
                      const std::string& rl, std::vector<Finding>* out) {
  if (d.samples == 0 || !(r.std > 0)) return;
  const bool known = d.scale != "other" && !r.scale.empty() && r.scale != "other";
  const double ratio = d.std / r.std;
  const std::string stats = fmt::format(
      "{}: mean {:.4g} std {:.4g} range [{:.4g}, {:.4g}]; {}: mean "
      "{:.4g} std {:.4g}",
      dl, d.mean, d.std, d.min, d.max, rl, r.mean, r.std);
  bool scale_found = false;
  if (known && d.scale != r.scale) {
    const bool norm = (d.scale == "normalized") != (r.scale == "normalized") &&
                      (d.scale == "0-1" || r.scale == "0-1");
    Add(out, norm ? "normalization_mismatch" : "scale_mismatch", "error", d.input,
        fmt::format("'{}': {} data looks {} but {} looks {}{} ({})", d.input, dl, d.scale, rl,
                    r.scale,
                    norm ? ": mean/std normalization applied to one and not the other"
                         : " (0-255 vs 0-1: a missing or extra /255)",
                    stats));
    scale_found = true;
  } else if (ratio < kScaleRatioLow || ratio > kScaleRatioHigh) {
    const bool x255 = ratio > 200 && ratio < 300;
    const bool d255 = ratio < 1.0 / 200 && ratio > 1.0 / 300;
    Add(out, "scale_mismatch", "error", d.input,
        fmt::format("'{}': {} values are x{:.4g} the {} ones{} ({})", d.input, dl, ratio, rl,
                    x255   ? " (looks like 0-255 vs 0-1: a missing /255)"
                    : d255 ? " (looks like 0-1 vs 0-255: an extra /255)"
                           : "",
                    stats));
    scale_found = true;
  }
  if (!scale_found && std::fabs(d.mean - r.mean) > kShiftInStd * r.std) {
    Add(out, "shift_mismatch", "error", d.input,
        fmt::format("'{}': {} values are shifted by {:+.4g} from the {} ones (same spread; a "
                    "different mean subtraction?) ({})",
                    d.input, dl, d.mean - r.mean, rl, stats));
  }
  // Channel order: the per-channel means match the reference only after a permutation.
  const size_t c = d.channel_mean.size();
  if (c >= 2 && c == r.channel_mean.size() && c <= 4 && !scale_found) {
    const auto [lo, hi] = std::minmax_element(r.channel_mean.begin(), r.channel_mean.end());
    const double spread = *hi - *lo;
    auto dist = [&](const std::vector<size_t>& p) {
      double m = 0;
      for (size_t i = 0; i < c; ++i)
        m = std::max(m, std::fabs(d.channel_mean[p[i]] - r.channel_mean[i]));
      return m;
    };
    std::vector<size_t> perm(c);
    std::iota(perm.begin(), perm.end(), 0);
    const double d0 = dist(perm);
    if (spread > 0.1 * r.std && d0 > kChannelTolerance * spread) {
      double best = d0;
      std::vector<size_t> best_perm = perm;
      while (std::next_permutation(perm.begin(), perm.end())) {
        if (dist(perm) < best) best = dist(perm), best_perm = perm;
      }
      if (best < kChannelTolerance * spread && best < 0.5 * d0) {
        std::string order;
        for (size_t i = 0; i < c; ++i) order += fmt::format("{}{}", i ? "," : "", best_perm[i]);
        Add(out, "channel_order_swapped", "error", d.input,
            fmt::format(
                "'{}': {} channel means {} match the {} ones {} only in channel order ({}): "
                "RGB vs BGR?",
                d.input, dl, JoinDoubles(d.channel_mean), rl, JoinDoubles(r.channel_mean), order));
      }
    }
  }
}

void CheckExpectation(const InputStats& d, const std::string& dl, const InputExpectation& e,
                      std::vector<Finding>* out) {
  if (d.samples == 0) return;
  if (e.has_range) {
    const double tol = 0.01 * (e.hi - e.lo);
    if (d.min < e.lo - tol || d.max > e.hi + tol) {
      const std::string expected =
          ClassifyScale(e.lo, e.hi, 0.5 * (e.lo + e.hi), 0.5 * (e.hi - e.lo));
      std::string looks;
      if (d.scale != "other" && d.scale != expected) {
        looks = fmt::format(": looks like {} data for a {} model", d.scale, expected);
      }
      Add(out, "expectation_mismatch", "error", d.input,
          fmt::format("'{}': {} values span [{:.4g}, {:.4g}], expected range [{:.4g}, {:.4g}]{}",
                      d.input, dl, d.min, d.max, e.lo, e.hi, looks));
    }
  }
  if (!e.mean.empty() || !e.std.empty()) {
    InputStats r;
    r.input = d.input;
    r.samples = 1;
    const size_t c = std::max(e.mean.size(), e.std.size());
    r.channel_mean = e.mean.empty() ? d.channel_mean : e.mean;
    r.channel_std = e.std.empty() ? d.channel_std : e.std;
    if (r.channel_mean.size() != c || r.channel_std.size() != c) return;
    // Pooled moments of the channels (equal channel sizes).
    double m = 0, v = 0;
    for (size_t i = 0; i < c; ++i) m += r.channel_mean[i] / static_cast<double>(c);
    for (size_t i = 0; i < c; ++i) {
      v += (r.channel_std[i] * r.channel_std[i] +
            (r.channel_mean[i] - m) * (r.channel_mean[i] - m)) /
           static_cast<double>(c);
    }
    r.mean = m, r.std = std::sqrt(v);
    std::vector<Finding> found;
    CompareInputSets(d, dl, r, "expected", &found);
    for (Finding& f : found) {
      if (f.code == "scale_mismatch" || f.code == "shift_mismatch") f.code = "expectation_mismatch";
      out->push_back(std::move(f));
    }
  }
}

}  // namespace quantkit::pipelines
