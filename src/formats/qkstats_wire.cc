#include "formats/qkstats_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/byte_io.h"
#include "common/check.h"

namespace quantkit::formats {
namespace {

constexpr char kMagic[8] = {'Q', 'K', 'S', 'T', 'W', 'I', 'R', '2'};
constexpr uint32_t kByteOrder = 0x01020304;

// Sparse bins: (index, count) of the non-zero ones.
void PutBins(ByteWriter& out, const std::vector<int64_t>& bins) {
  uint32_t n = 0;
  for (int64_t c : bins) n += c != 0 ? 1 : 0;
  out.Put(n);
  out.Reserve(n * (sizeof(uint32_t) + sizeof(int64_t)));
  for (size_t k = 0; k < bins.size(); ++k) {
    if (bins[k] == 0) continue;
    out.Put(static_cast<uint32_t>(k));
    out.Put(bins[k]);
  }
}

Result<std::vector<int64_t>> GetBins(ByteReader& in, const std::string& what,
                                     int64_t bins_per_sign) {
  QK_ASSIGN_OR_RETURN(uint32_t n, in.Get<uint32_t>("bin count"));
  QK_RETURN_IF_NOT(n <= bins_per_sign, StatusCode::kInvalidArgument, "{}: {} has {} bins of {}",
                   in.source(), what, n, bins_per_sign);
  std::vector<int64_t> bins(static_cast<size_t>(bins_per_sign), 0);
  int64_t previous = -1;
  for (uint32_t i = 0; i < n; ++i) {
    QK_ASSIGN_OR_RETURN(uint32_t k, in.Get<uint32_t>("bin index"));
    QK_ASSIGN_OR_RETURN(int64_t c, in.Get<int64_t>("bin count"));
    QK_RETURN_IF_NOT(
        static_cast<int64_t>(k) > previous && k < bins_per_sign && c > 0,
        StatusCode::kInvalidArgument,
        "{}: {} bins must increase within [0, {}) with positive counts (bin {}, count {})",
        in.source(), what, bins_per_sign, k, c);
    bins[k] = c;
    previous = k;
  }
  return bins;
}

Result<quant::StreamingHistogram> GetHistogram(ByteReader& in, const std::string& p,
                                               int log2_bins) {
  QK_ASSIGN_OR_RETURN(uint8_t has_range, in.Get<uint8_t>("histogram.has_range"));
  QK_ASSIGN_OR_RETURN(int32_t range_exp, in.Get<int32_t>("histogram.range_exp"));
  QK_ASSIGN_OR_RETURN(int64_t zeros, in.Get<int64_t>("histogram.zeros"));
  QK_ASSIGN_OR_RETURN(int64_t nonfinite, in.Get<int64_t>("histogram.nonfinite"));
  QK_RETURN_IF_NOT(has_range <= 1 && zeros >= 0 && nonfinite >= 0, StatusCode::kInvalidArgument,
                   "{}: inconsistent histogram header", p);
  // The writer puts the lowest exponent when nothing was binned: any other value read without a
  // range would silently stand for another scale.
  QK_RETURN_IF_NOT(range_exp >= quant::kMinRangeExp && range_exp <= quant::kMaxRangeExp &&
                       (has_range != 0 || range_exp == quant::kMinRangeExp),
                   StatusCode::kInvalidArgument,
                   "{}: histogram range_exp {} out of range [{}, {}]{}", p, range_exp,
                   quant::kMinRangeExp, quant::kMaxRangeExp,
                   has_range ? "" : " (or not the empty histogram's)");
  const int64_t n = int64_t{1} << log2_bins;
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> pos, GetBins(in, p + " positive histogram", n));
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> neg, GetBins(in, p + " negative histogram", n));
  Result<quant::StreamingHistogram> hist = quant::StreamingHistogram::FromParts(
      log2_bins, has_range != 0, range_exp, std::move(pos), std::move(neg), zeros, nonfinite);
  if (!hist.ok()) return hist.status().WithContext(p);
  return hist;
}

Result<quant::TensorCollector> GetTensor(ByteReader& in, const std::string& source,
                                         const std::string& name, int log2_bins) {
  const std::string p = fmt::format("{}: tensor '{}'", source, name);
  quant::RangeStats rs;
  QK_ASSIGN_OR_RETURN(rs.count, in.Get<int64_t>("range.count"));
  QK_ASSIGN_OR_RETURN(rs.nan_count, in.Get<int64_t>("range.nan"));
  QK_ASSIGN_OR_RETURN(rs.posinf_count, in.Get<int64_t>("range.posinf"));
  QK_ASSIGN_OR_RETURN(rs.neginf_count, in.Get<int64_t>("range.neginf"));
  QK_ASSIGN_OR_RETURN(rs.zero_count, in.Get<int64_t>("range.zeros"));
  QK_ASSIGN_OR_RETURN(rs.min, in.Get<float>("range.min"));
  QK_ASSIGN_OR_RETURN(rs.max, in.Get<float>("range.max"));
  QK_ASSIGN_OR_RETURN(rs.amax, in.Get<float>("range.amax"));
  QK_RETURN_IF_NOT(rs.count >= 0 && rs.nan_count >= 0 && rs.posinf_count >= 0 &&
                       rs.neginf_count >= 0 && rs.zero_count >= 0 && rs.finite_count() >= 0,
                   StatusCode::kInvalidArgument, "{}: inconsistent range counts", p);
  QK_RETURN_IF_NOT(rs.Consistent(), StatusCode::kInvalidArgument,
                   "{}: inconsistent range (min {:g}, max {:g}, amax {:g} over {} finite values)",
                   p, rs.min, rs.max, rs.amax, rs.finite_count());
  QK_ASSIGN_OR_RETURN(uint8_t has_histogram, in.Get<uint8_t>("histogram flag"));
  QK_RETURN_IF_NOT(has_histogram <= 1, StatusCode::kInvalidArgument, "{}: bad histogram flag", p);
  std::optional<quant::StreamingHistogram> hist;
  if (has_histogram) {
    QK_ASSIGN_OR_RETURN(hist, GetHistogram(in, p, log2_bins));
    QK_RETURN_IF_NOT(hist->binned_count() + hist->nonfinite_count() == rs.count,
                     StatusCode::kInvalidArgument,
                     "{}: histogram holds {} values but range.count is {}", p,
                     hist->binned_count() + hist->nonfinite_count(), rs.count);
  }
  std::optional<quant::PerChannelStats> pc;
  QK_ASSIGN_OR_RETURN(uint8_t has_pc, in.Get<uint8_t>("per_channel"));
  QK_RETURN_IF_NOT(has_pc <= 1, StatusCode::kInvalidArgument, "{}: bad per-channel flag", p);
  if (has_pc) {
    quant::PerChannelStats s;
    QK_ASSIGN_OR_RETURN(s.axis, in.Get<int64_t>("per_channel.axis"));
    QK_ASSIGN_OR_RETURN(s.nonfinite_count, in.Get<int64_t>("per_channel.nonfinite"));
    QK_ASSIGN_OR_RETURN(s.amax, in.GetVector<float>("per_channel.amax"));
    QK_RETURN_IF_NOT(s.axis >= 0 && s.nonfinite_count >= 0 && s.nonfinite_count <= rs.count &&
                         std::all_of(s.amax.begin(), s.amax.end(),
                                     [](float a) { return std::isfinite(a) && a >= 0.0f; }),
                     StatusCode::kInvalidArgument, "{}: inconsistent per-channel statistics", p);
    pc = std::move(s);
  }
  if (!hist) {
    QK_RETURN_IF_NOT(!pc, StatusCode::kInvalidArgument,
                     "{}: range-only statistics with per-channel amax", p);
    return quant::TensorCollector::RangeOnly(rs);
  }
  Result<quant::TensorCollector> t =
      quant::TensorCollector::FromParts(rs, std::move(*hist), std::move(pc));
  if (!t.ok()) return t.status().WithContext(p);
  return t;
}

}  // namespace

std::string EncodeStatsWire(const StatsFile& stats) {
  ByteWriter out;
  for (char c : kMagic) out.Put(c);
  out.Put(kByteOrder);
  out.Put(static_cast<int32_t>(stats.histogram_log2_bins));
  out.PutString(stats.model_sha256);
  out.Put(static_cast<uint32_t>(stats.tensors.size()));
  for (const auto& [name, t] : stats.tensors) {
    out.PutString(name);
    const quant::RangeStats& r = t.range();
    for (int64_t v : {r.count, r.nan_count, r.posinf_count, r.neginf_count, r.zero_count})
      out.Put(v);
    for (float v : {r.min, r.max, r.amax}) out.Put(v);
    // The max-only fast path collects no histogram: its tensors travel as their range alone.
    out.Put(static_cast<uint8_t>(t.has_histogram() ? 1 : 0));
    if (t.has_histogram()) {
      const quant::StreamingHistogram& h = t.histogram();
      out.Put(static_cast<uint8_t>(h.empty_range() ? 0 : 1));
      out.Put(static_cast<int32_t>(h.range_exp()));
      out.Put(h.zero_count());
      out.Put(h.nonfinite_count());
      PutBins(out, h.positive());
      PutBins(out, h.negative());
    }
    const std::optional<quant::PerChannelStats> pc = t.per_channel();
    out.Put(static_cast<uint8_t>(pc ? 1 : 0));
    if (pc) {
      out.Put(pc->axis);
      out.Put(pc->nonfinite_count);
      out.PutVector(pc->amax);
    }
  }
  return out.Take();
}

Result<StatsFile> DecodeStatsWire(const std::string& bytes, const std::string& source,
                                  const std::string& expected_model_sha256) {
  ByteReader in(bytes, source);
  for (char c : kMagic) {
    QK_ASSIGN_OR_RETURN(char got, in.Get<char>("the header"));
    QK_RETURN_IF_NOT(got == c, StatusCode::kInvalidArgument,
                     "{}: not quantkit statistics (bad header)", source);
  }
  QK_ASSIGN_OR_RETURN(uint32_t order, in.Get<uint32_t>("the byte order"));
  QK_RETURN_IF_NOT(order == kByteOrder, StatusCode::kInvalidArgument,
                   "{}: statistics from a machine of another byte order", source);
  StatsFile stats;
  QK_ASSIGN_OR_RETURN(int32_t log2_bins, in.Get<int32_t>("log2_bins"));
  QK_RETURN_IF_NOT(log2_bins >= quant::kMinStreamLog2Bins && log2_bins <= quant::kMaxStreamLog2Bins,
                   StatusCode::kInvalidArgument, "{}: histogram log2_bins {} outside [{}, {}]",
                   source, log2_bins, quant::kMinStreamLog2Bins, quant::kMaxStreamLog2Bins);
  stats.histogram_log2_bins = log2_bins;
  QK_ASSIGN_OR_RETURN(stats.model_sha256, in.GetString("model_sha256"));
  QK_RETURN_IF_NOT(expected_model_sha256.empty() || stats.model_sha256 == expected_model_sha256,
                   StatusCode::kInvalidArgument,
                   "{}: statistics of another model (sha256 {}, expected {})", source,
                   stats.model_sha256, expected_model_sha256);
  QK_ASSIGN_OR_RETURN(uint32_t tensors, in.Get<uint32_t>("the tensor count"));
  for (uint32_t i = 0; i < tensors; ++i) {
    QK_ASSIGN_OR_RETURN(std::string name, in.GetString("a tensor name"));
    QK_ASSIGN_OR_RETURN(quant::TensorCollector t, GetTensor(in, source, name, log2_bins));
    QK_RETURN_IF_NOT(stats.tensors.emplace(name, std::move(t)).second, StatusCode::kInvalidArgument,
                     "{}: tensor '{}' appears twice", source, name);
  }
  QK_RETURN_IF_NOT(in.done(), StatusCode::kInvalidArgument, "{}: {} bytes after the statistics",
                   source, bytes.size() - in.at());
  return stats;
}

}  // namespace quantkit::formats
