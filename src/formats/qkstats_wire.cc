#include "formats/qkstats_wire.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/check.h"

namespace quantkit::formats {
namespace {

constexpr char kMagic[8] = {'Q', 'K', 'S', 'T', 'W', 'I', 'R', '1'};
constexpr uint32_t kByteOrder = 0x01020304;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void PutString(const std::string& s) {
    Put(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  // Sparse bins: (index, count) of the non-zero ones.
  void PutBins(const std::vector<int64_t>& bins) {
    uint32_t n = 0;
    for (int64_t c : bins) n += c != 0 ? 1 : 0;
    Put(n);
    out_.reserve(out_.size() + n * (sizeof(uint32_t) + sizeof(int64_t)));
    for (size_t k = 0; k < bins.size(); ++k) {
      if (bins[k] == 0) continue;
      Put(static_cast<uint32_t>(k));
      Put(bins[k]);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Bounds-checked reads; every failure names the source and what was being read.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  template <typename T>
  Result<T> Get(const char* what) {
    QK_RETURN_IF_NOT(bytes_.size() - at_ >= sizeof(T), StatusCode::kInvalidArgument,
                     "{}: truncated statistics (reading {} at byte {} of {})", source_, what, at_, bytes_.size());
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  Result<std::string> GetString(const char* what) {
    QK_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>(what));
    QK_RETURN_IF_NOT(bytes_.size() - at_ >= n, StatusCode::kInvalidArgument,
                     "{}: truncated statistics (reading {} of {} bytes at byte {})", source_, what, n, at_);
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  Result<std::vector<int64_t>> GetBins(const std::string& what, int64_t bins_per_sign) {
    QK_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>("bin count"));
    QK_RETURN_IF_NOT(n <= bins_per_sign, StatusCode::kInvalidArgument, "{}: {} has {} bins of {}", source_,
                     what, n, bins_per_sign);
    std::vector<int64_t> bins(static_cast<size_t>(bins_per_sign), 0);
    int64_t previous = -1;
    for (uint32_t i = 0; i < n; ++i) {
      QK_ASSIGN_OR_RETURN(uint32_t k, Get<uint32_t>("bin index"));
      QK_ASSIGN_OR_RETURN(int64_t c, Get<int64_t>("bin count"));
      QK_RETURN_IF_NOT(static_cast<int64_t>(k) > previous && k < bins_per_sign && c > 0,
                       StatusCode::kInvalidArgument,
                       "{}: {} bins must increase within [0, {}) with positive counts (bin {}, count {})", source_,
                       what, bins_per_sign, k, c);
      bins[k] = c;
      previous = k;
    }
    return bins;
  }
  bool done() const { return at_ == bytes_.size(); }
  size_t at() const { return at_; }

 private:
  const std::string& bytes_;
  const std::string& source_;
  size_t at_ = 0;
};

Result<quant::TensorCollector> GetTensor(Reader& in, const std::string& source, const std::string& name,
                                         int log2_bins) {
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
  QK_RETURN_IF_NOT(rs.count >= 0 && rs.nan_count >= 0 && rs.posinf_count >= 0 && rs.neginf_count >= 0 &&
                       rs.zero_count >= 0 && rs.finite_count() >= 0,
                   StatusCode::kInvalidArgument, "{}: inconsistent range counts", p);
  QK_ASSIGN_OR_RETURN(uint8_t has_range, in.Get<uint8_t>("histogram.has_range"));
  QK_ASSIGN_OR_RETURN(int32_t range_exp, in.Get<int32_t>("histogram.range_exp"));
  QK_ASSIGN_OR_RETURN(int64_t zeros, in.Get<int64_t>("histogram.zeros"));
  QK_ASSIGN_OR_RETURN(int64_t nonfinite, in.Get<int64_t>("histogram.nonfinite"));
  QK_RETURN_IF_NOT(has_range <= 1 && zeros >= 0 && nonfinite >= 0, StatusCode::kInvalidArgument,
                   "{}: inconsistent histogram header", p);
  const int64_t n = int64_t{1} << log2_bins;
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> pos, in.GetBins(p + " positive histogram", n));
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> neg, in.GetBins(p + " negative histogram", n));
  Result<quant::StreamingHistogram> hist = quant::StreamingHistogram::FromParts(
      log2_bins, has_range != 0, range_exp, std::move(pos), std::move(neg), zeros, nonfinite);
  if (!hist.ok()) return hist.status().WithContext(p);
  QK_RETURN_IF_NOT(hist->binned_count() + hist->nonfinite_count() == rs.count, StatusCode::kInvalidArgument,
                   "{}: histogram holds {} values but range.count is {}", p,
                   hist->binned_count() + hist->nonfinite_count(), rs.count);
  std::optional<quant::PerChannelStats> pc;
  QK_ASSIGN_OR_RETURN(uint8_t has_pc, in.Get<uint8_t>("per_channel"));
  QK_RETURN_IF_NOT(has_pc <= 1, StatusCode::kInvalidArgument, "{}: bad per-channel flag", p);
  if (has_pc) {
    quant::PerChannelStats s;
    QK_ASSIGN_OR_RETURN(s.axis, in.Get<int64_t>("per_channel.axis"));
    QK_ASSIGN_OR_RETURN(s.nonfinite_count, in.Get<int64_t>("per_channel.nonfinite"));
    QK_ASSIGN_OR_RETURN(uint32_t channels, in.Get<uint32_t>("per_channel.amax"));
    QK_RETURN_IF_NOT(s.axis >= 0 && s.nonfinite_count >= 0 && channels <= (1u << 24), StatusCode::kInvalidArgument,
                     "{}: inconsistent per-channel statistics", p);
    for (uint32_t c = 0; c < channels; ++c) {
      QK_ASSIGN_OR_RETURN(float a, in.Get<float>("per_channel.amax[]"));
      s.amax.push_back(a);
    }
    pc = std::move(s);
  }
  Result<quant::TensorCollector> t = quant::TensorCollector::FromParts(rs, std::move(*hist), std::move(pc));
  if (!t.ok()) return t.status().WithContext(p);
  return t;
}

}  // namespace

std::string EncodeStatsWire(const StatsFile& stats) {
  Writer out;
  for (char c : kMagic) out.Put(c);
  out.Put(kByteOrder);
  out.Put(static_cast<int32_t>(stats.histogram_log2_bins));
  out.PutString(stats.model_sha256);
  out.Put(static_cast<uint32_t>(stats.tensors.size()));
  for (const auto& [name, t] : stats.tensors) {
    QK_CHECK(t.has_histogram(), "tensor '{}': range-only statistics cannot be exchanged", name);
    out.PutString(name);
    const quant::RangeStats& r = t.range();
    for (int64_t v : {r.count, r.nan_count, r.posinf_count, r.neginf_count, r.zero_count}) out.Put(v);
    for (float v : {r.min, r.max, r.amax}) out.Put(v);
    const quant::StreamingHistogram& h = t.histogram();
    out.Put(static_cast<uint8_t>(h.empty_range() ? 0 : 1));
    out.Put(static_cast<int32_t>(h.range_exp()));
    out.Put(h.zero_count());
    out.Put(h.nonfinite_count());
    out.PutBins(h.positive());
    out.PutBins(h.negative());
    const std::optional<quant::PerChannelStats> pc = t.per_channel();
    out.Put(static_cast<uint8_t>(pc ? 1 : 0));
    if (pc) {
      out.Put(pc->axis);
      out.Put(pc->nonfinite_count);
      out.Put(static_cast<uint32_t>(pc->amax.size()));
      for (float a : pc->amax) out.Put(a);
    }
  }
  return out.Take();
}

Result<StatsFile> DecodeStatsWire(const std::string& bytes, const std::string& source,
                                  const std::string& expected_model_sha256) {
  Reader in(bytes, source);
  for (char c : kMagic) {
    QK_ASSIGN_OR_RETURN(char got, in.Get<char>("the header"));
    QK_RETURN_IF_NOT(got == c, StatusCode::kInvalidArgument, "{}: not quantkit statistics (bad header)", source);
  }
  QK_ASSIGN_OR_RETURN(uint32_t order, in.Get<uint32_t>("the byte order"));
  QK_RETURN_IF_NOT(order == kByteOrder, StatusCode::kInvalidArgument,
                   "{}: statistics from a machine of another byte order", source);
  StatsFile stats;
  QK_ASSIGN_OR_RETURN(int32_t log2_bins, in.Get<int32_t>("log2_bins"));
  QK_RETURN_IF_NOT(log2_bins >= quant::kMinStreamLog2Bins && log2_bins <= quant::kMaxStreamLog2Bins,
                   StatusCode::kInvalidArgument, "{}: histogram log2_bins {} outside [{}, {}]", source, log2_bins,
                   quant::kMinStreamLog2Bins, quant::kMaxStreamLog2Bins);
  stats.histogram_log2_bins = log2_bins;
  QK_ASSIGN_OR_RETURN(stats.model_sha256, in.GetString("model_sha256"));
  QK_RETURN_IF_NOT(expected_model_sha256.empty() || stats.model_sha256 == expected_model_sha256,
                   StatusCode::kInvalidArgument, "{}: statistics of another model (sha256 {}, expected {})", source,
                   stats.model_sha256, expected_model_sha256);
  QK_ASSIGN_OR_RETURN(uint32_t tensors, in.Get<uint32_t>("the tensor count"));
  for (uint32_t i = 0; i < tensors; ++i) {
    QK_ASSIGN_OR_RETURN(std::string name, in.GetString("a tensor name"));
    QK_ASSIGN_OR_RETURN(quant::TensorCollector t, GetTensor(in, source, name, log2_bins));
    QK_RETURN_IF_NOT(stats.tensors.emplace(name, std::move(t)).second, StatusCode::kInvalidArgument,
                     "{}: tensor '{}' appears twice", source, name);
  }
  QK_RETURN_IF_NOT(in.done(), StatusCode::kInvalidArgument, "{}: {} bytes after the statistics", source,
                   bytes.size() - in.at());
  return stats;
}

}  // namespace quantkit::formats
