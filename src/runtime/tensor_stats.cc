#include "runtime/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "common/check.h"
#include "runtime/aten_bridge.h"
#include "runtime/device_placement.h"
#include "runtime/tensor_stats_aten.h"

namespace quantkit::runtime {
namespace {

// Exponent e of the smallest power of two strictly greater than a (finite, > 0), as the host
// collector computes it (frexp: a = m 2^e, m in [0.5, 1)).
int RangeExpFor(double a, int min_exp) {
  int e = 0;
  std::frexp(a, &e);
  return std::max(e, min_exp);
}

// The number of true values of a 1-d bool tensor, as a 1-element float64 tensor on its device.
// Summing bools makes ATen cast the whole mask to int64 first (8 bytes written per element);
// rows of 255 bytes summed as uint8 cannot overflow and need no cast, so only the row sums
// (1/255 of the mask) are widened.
at::Tensor CountTrue(const at::Tensor& mask) {
  const at::Tensor bytes = mask.view(at::kByte);  // bool and uint8 share their element size
  const int64_t n = bytes.numel(), rows = n / 255, head = rows * 255;
  at::Tensor total = bytes.narrow(0, head, n - head).sum(at::kLong);
  if (rows > 0)
    total =
        total + bytes.narrow(0, 0, head).view({rows, 255}).sum(1, false, at::kByte).sum(at::kLong);
  return total.to(at::kDouble).reshape({1});
}

// 2^s as a float32 tensor built from its IEEE bits (exact on any device); s in [-126, 127].
at::Tensor PowerOfTwo(const at::Tensor& s) {
  return at::bitwise_left_shift((s + 127).to(at::kInt), 23).view(at::kFloat);
}

// kExact: everything counted apart, min/max over the finite values (see the header).
void LaunchExact(const at::Tensor& input, const at::Tensor& x, const TensorStatsRequest& request,
                 std::optional<int64_t> axis, PendingTensorStats* p) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t n = p->bins;
  // Everything the host needs in ONE tensor, so that one device-to-host copy brings it: the
  // counts (exact in double below 2^53), the finite min, max and abs-max, the 2n+1 bin counts and
  // the per-channel abs-max, as doubles.
  const at::Tensor finite = at::isfinite(x);
  const at::Tensor abs = at::where(finite, x.abs(), at::zeros({}, x.options()));
  const at::Tensor amax_device = abs.max().to(at::kDouble);
  std::vector<at::Tensor> parts = {at::stack(
      {at::isnan(x).sum().to(at::kDouble), x.eq(kInf).sum().to(at::kDouble),
       x.eq(-kInf).sum().to(at::kDouble), x.eq(0).sum().to(at::kDouble),
       at::where(finite, x, at::full({}, kInf, x.options())).min().to(at::kDouble),
       at::where(finite, x, at::full({}, -kInf, x.options())).max().to(at::kDouble), amax_device})};
  if (p->stats.has_histogram) {
    // The range exponent where the data is: frexp of the abs-max, as RangeExpFor does on the host
    // (exact), and the bin scale 2^(log2_bins - e) built from its IEEE bits (exact on any device).
    // Bin index in [0, 2n): the negative half is offset by n; zeros and non-finite values go to
    // the discarded bin 2n. abs < 2^e, so k < n; the clamp only guards the invariant. With an
    // abs-max of 0 every value lands in bin 2n, and the host ignores the counts.
    const at::Tensor e =
        at::clamp_min(std::get<1>(at::frexp(amax_device)).to(at::kLong), request.min_range_exp);
    const at::Tensor scale =
        ((request.log2_bins - e + 1023) * (int64_t{1} << 52)).view(at::kDouble);
    at::Tensor k = at::clamp_max((abs.to(at::kDouble) * scale).to(at::kInt), n - 1);
    k = k + x.lt(0).to(at::kInt) * static_cast<int>(n);
    const at::Tensor binned = finite.logical_and(x.ne(0));
    k = at::where(binned, k, at::full({}, static_cast<int>(2 * n), k.options()));
    parts.push_back(at::bincount(k, {}, 2 * n + 1).to(at::kDouble));
  }
  if (axis && p->channels > 0) {
    at::Tensor per = abs.reshape(input.sizes()).movedim(*axis, 0).reshape({p->channels, -1});
    parts.push_back(std::get<0>(per.max(1)).to(at::kDouble));
  }
  p->packed = at::cat(parts);
}

// kFast: valid when x is finite, which the packed min/max tell the host (aminmax propagates NaN
// and infinity). Packs min, max, the zero count, the 2n bin counts, the per-channel abs-max.
void LaunchFast(const at::Tensor& input, const at::Tensor& x, const TensorStatsRequest& request,
                std::optional<int64_t> axis, PendingTensorStats* p) {
  const int64_t n = p->bins;
  const auto [lo, hi] = at::aminmax(x);
  const at::Tensor range = at::stack({lo, hi});
  std::vector<at::Tensor> parts = {range.to(at::kDouble), CountTrue(x.eq(0))};
  if (p->stats.has_histogram) {
    // As kExact: e from frexp of the abs-max (clamped below), fine bin k = floor(|x| 2^(L - e)).
    // |x| 2^(L-e) is exact in float32 where it is >= 1 (a power-of-two scale only shifts the
    // exponent; only results below 1, whose floor is 0 anyway, can round), so float32 suffices;
    // the scale is applied in two factors that each fit float32's exponent range. k < n since
    // |x| < 2^e. Zeros land in positive bin 0 and the host takes the zero count off that bin.
    // histc bins k + n for negative x; unlike bincount (which asks the host for its input's min
    // and max) it needs no synchronisation, and its float64 counts are exact below 2^53.
    const at::Tensor e = at::clamp_min(std::get<1>(at::frexp(range.abs().amax().to(at::kDouble))),
                                       request.min_range_exp);
    const at::Tensor shift =
        at::clamp(request.log2_bins - e, -252, 254);  // a no-op unless x is not finite
    const at::Tensor half = at::div(shift, 2, "floor");
    at::Tensor k = x.abs();
    k.mul_(PowerOfTwo(half)).mul_(PowerOfTwo(shift - half)).floor_();
    k.add_(x.lt(0), static_cast<double>(n));
    parts.push_back(at::histc(k.to(at::kDouble), 2 * n, 0, static_cast<double>(2 * n)));
  }
  if (axis && p->channels > 0) {
    std::vector<int64_t> others;
    for (int64_t d = 0; d < input.dim(); ++d)
      if (d != *axis) others.push_back(d);
    const at::Tensor xs = x.view(input.sizes());
    parts.push_back(at::maximum(at::amax(xs, others), at::amin(xs, others).neg()).to(at::kDouble));
  }
  p->packed = at::cat(parts);
  p->source = input;
}

}  // namespace

Result<PendingTensorStats> LaunchTensorStats(const at::Tensor& input,
                                             const TensorStatsRequest& request,
                                             StatsAlgorithm algorithm) {
  QK_RETURN_IF_NOT(!input.is_complex(), StatusCode::kUnsupported,
                   "complex tensors have no calibration statistics");
  QK_RETURN_IF_NOT(request.log2_bins >= 1 && request.log2_bins <= 30, StatusCode::kInvalidArgument,
                   "log2_bins {} out of range", request.log2_bins);
  PendingTensorStats p;
  p.request = request;
  p.algorithm = algorithm;
  TensorStats& s = p.stats;
  s.shape = input.sizes().vec();
  const at::Tensor x = input.to(at::kFloat).reshape({-1});
  const int64_t n = int64_t{1} << request.log2_bins;
  p.bins = n;
  s.count = x.numel();
  s.has_histogram = request.histogram;
  if (s.has_histogram) {
    s.positive.assign(static_cast<size_t>(n), 0);
    s.negative.assign(static_cast<size_t>(n), 0);
  }

  std::optional<int64_t> axis;
  if (request.channel_axis) {
    const int64_t rank = input.dim();
    const int64_t a =
        *request.channel_axis < 0 ? *request.channel_axis + rank : *request.channel_axis;
    QK_RETURN_IF_NOT(a >= 0 && a < rank, StatusCode::kInvalidArgument,
                     "per-channel axis {} is out of range for a rank-{} tensor",
                     *request.channel_axis, rank);
    axis = a;
    s.has_per_channel = true;
    s.axis = a;
    s.channel_amax.assign(static_cast<size_t>(input.size(a)), 0.0f);
    const int64_t channels = input.size(a);
    if (x.numel() / std::max<int64_t>(channels, 1) > 0) p.channels = channels;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  s.min = kInf;
  s.max = -kInf;
  if (s.count == 0) return p;
  if (algorithm == StatsAlgorithm::kFast) {
    LaunchFast(input, x, request, axis, &p);
  } else {
    LaunchExact(input, x, request, axis, &p);
  }
  return p;
}

bool FinishTensorStats(const double* v, PendingTensorStats* p) {
  TensorStats& s = p->stats;
  if (s.count == 0) return true;
  const int64_t n = p->bins;
  const bool fast = p->algorithm == StatsAlgorithm::kFast;
  if (fast && !(std::isfinite(v[0]) && std::isfinite(v[1]))) return false;
  if (fast) {
    s.zero_count = static_cast<int64_t>(v[2]);
  } else {
    s.nan_count = static_cast<int64_t>(v[0]);
    s.posinf_count = static_cast<int64_t>(v[1]);
    s.neginf_count = static_cast<int64_t>(v[2]);
    s.zero_count = static_cast<int64_t>(v[3]);
  }
  const double lo = fast ? v[0] : v[4], hi = fast ? v[1] : v[5];
  // -0.0 and +0.0 compare equal, so which one min/max returns depends on the order: report +0.
  s.min = lo == 0 ? 0.0f : static_cast<float>(lo);
  s.max = hi == 0 ? 0.0f : static_cast<float>(hi);
  const double amax = fast ? std::max(std::fabs(lo), std::fabs(hi)) : v[6];
  const double* rest = v + (fast ? 3 : 7);
  if (s.has_histogram) {
    if (amax > 0) {
      s.has_range = true;
      s.range_exp = RangeExpFor(amax, p->request.min_range_exp);
      for (int64_t i = 0; i < n; ++i) {
        s.positive[static_cast<size_t>(i)] = static_cast<int64_t>(rest[i]);
        s.negative[static_cast<size_t>(i)] = static_cast<int64_t>(rest[n + i]);
      }
      if (fast) s.positive[0] -= s.zero_count;  // zeros were binned with the smallest positives
    }
    rest += fast ? 2 * n : 2 * n + 1;
  }
  if (s.has_per_channel) {
    for (int64_t c = 0; c < p->channels; ++c)
      s.channel_amax[static_cast<size_t>(c)] = static_cast<float>(rest[c]);
    s.channel_nonfinite = s.nonfinite_count();
  }
  p->source.reset();
  return true;
}

Status CompleteTensorStats(const double* packed, PendingTensorStats* p) {
  if (FinishTensorStats(packed, p)) return Status::Ok();
  QK_ASSIGN_OR_RETURN(PendingTensorStats exact,
                      LaunchTensorStats(p->source, p->request, StatsAlgorithm::kExact));
  const at::Tensor host = exact.packed.to(at::kCPU).contiguous();
  QK_RETURN_IF_NOT(FinishTensorStats(host.data_ptr<double>(), &exact), StatusCode::kInternal,
                   "exact tensor statistics were not final");
  p->stats = std::move(exact.stats);
  p->source.reset();
  return Status::Ok();
}

Result<TensorStats> ComputeTensorStats(const at::Tensor& input, const TensorStatsRequest& request,
                                       StatsAlgorithm algorithm) {
  QK_ASSIGN_OR_RETURN(PendingTensorStats p, LaunchTensorStats(input, request, algorithm));
  if (!p.packed.defined()) return std::move(p.stats);
  const at::Tensor host = p.packed.to(at::kCPU).contiguous();
  QK_RETURN_IF_ERROR(CompleteTensorStats(host.data_ptr<double>(), &p));
  return std::move(p.stats);
}

Result<TensorStats> ComputeTensorStats(const TensorView& view, const TensorStatsRequest& request,
                                       const Device& device) {
  QK_RETURN_IF_ERROR(CheckDeviceAvailable(device));
  at::ScalarType type;
  QK_RETURN_IF_NOT(ToScalarType(view.dtype, &type), StatusCode::kUnsupported,
                   "dtype {} has no calibration statistics", ir::DTypeName(view.dtype));
  try {
    at::Tensor host = view.numel() == 0 ? at::empty(view.shape, at::TensorOptions().dtype(type))
                                        : at::from_blob(const_cast<void*>(view.data), view.shape,
                                                        at::TensorOptions().dtype(type));
    return ComputeTensorStats(host.to(ToAtenDevice(device)), request);
  } catch (const c10::Error& e) {
    return Status(StatusCode::kInternal, e.what_without_backtrace());
  }
}

}  // namespace quantkit::runtime

namespace quantkit::runtime {

Status Observer::OnStats(const std::string& tensor_name, const ir::Node* /*producer*/,
                         const TensorStats& /*stats*/) {
  return MakeStatus(StatusCode::kInternal,
                    "tensor '{}': the observer asked for device statistics but does not take them",
                    tensor_name);
}

bool DeviceStatsOnHost() {
  static const bool on = [] {
    const char* v = std::getenv("QUANTKIT_DEVICE_STATS");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

}  // namespace quantkit::runtime
