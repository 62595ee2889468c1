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

}  // namespace

Result<PendingTensorStats> LaunchTensorStats(const at::Tensor& input,
                                             const TensorStatsRequest& request) {
  QK_RETURN_IF_NOT(!input.is_complex(), StatusCode::kUnsupported,
                   "complex tensors have no calibration statistics");
  QK_RETURN_IF_NOT(request.log2_bins >= 1 && request.log2_bins <= 30, StatusCode::kInvalidArgument,
                   "log2_bins {} out of range", request.log2_bins);
  PendingTensorStats p;
  TensorStats& s = p.stats;
  s.shape = input.sizes().vec();
  const at::Tensor x = input.to(at::kFloat).reshape({-1});
  const int64_t n = int64_t{1} << request.log2_bins;
  p.bins = n;
  p.min_range_exp = request.min_range_exp;
  s.count = x.numel();
  s.has_histogram = request.histogram;
  if (s.has_histogram) {
    s.positive.assign(static_cast<size_t>(n), 0);
    s.negative.assign(static_cast<size_t>(n), 0);
  }

  std::optional<int64_t> axis;
  if (request.channel_axis) {
    const int64_t rank = input.dim();
    const int64_t a = *request.channel_axis < 0 ? *request.channel_axis + rank : *request.channel_axis;
    QK_RETURN_IF_NOT(a >= 0 && a < rank, StatusCode::kInvalidArgument,
                     "per-channel axis {} is out of range for a rank-{} tensor", *request.channel_axis,
                     rank);
    axis = a;
    s.has_per_channel = true;
    s.axis = a;
    s.channel_amax.assign(static_cast<size_t>(input.size(a)), 0.0f);
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  s.min = kInf;
  s.max = -kInf;
  if (s.count == 0) return p;

  // Everything the host needs in ONE tensor, so that one device-to-host copy brings it (there
  // were three per tensor: the scalars, then the histogram, whose bin scale needs the abs-max,
  // then the per-channel maxima): the counts (exact in double below 2^53), the finite min, max
  // and abs-max, the 2n+1 bin counts and the per-channel abs-max, as doubles.
  const at::Tensor finite = at::isfinite(x);
  const at::Tensor abs = at::where(finite, x.abs(), at::zeros({}, x.options()));
  const at::Tensor amax_device = abs.max().to(at::kDouble);
  std::vector<at::Tensor> parts = {
      at::stack({at::isnan(x).sum().to(at::kDouble), x.eq(kInf).sum().to(at::kDouble),
                 x.eq(-kInf).sum().to(at::kDouble), x.eq(0).sum().to(at::kDouble),
                 at::where(finite, x, at::full({}, kInf, x.options())).min().to(at::kDouble),
                 at::where(finite, x, at::full({}, -kInf, x.options())).max().to(at::kDouble), amax_device})};
  if (s.has_histogram) {
    // The range exponent where the data is: frexp of the abs-max, as RangeExpFor does on the host
    // (exact), and the bin scale 2^(log2_bins - e) built from its IEEE bits (exact on any device).
    // Bin index in [0, 2n): the negative half is offset by n; zeros and non-finite values go to
    // the discarded bin 2n. abs < 2^e, so k < n; the clamp only guards the invariant. With an
    // abs-max of 0 every value lands in bin 2n, and the host ignores the counts.
    const at::Tensor e = at::clamp_min(std::get<1>(at::frexp(amax_device)).to(at::kLong), request.min_range_exp);
    const at::Tensor scale = ((request.log2_bins - e + 1023) * (int64_t{1} << 52)).view(at::kDouble);
    at::Tensor k = at::clamp_max((abs.to(at::kDouble) * scale).to(at::kInt), n - 1);
    k = k + x.lt(0).to(at::kInt) * static_cast<int>(n);
    const at::Tensor binned = finite.logical_and(x.ne(0));
    k = at::where(binned, k, at::full({}, static_cast<int>(2 * n), k.options()));
    parts.push_back(at::bincount(k, {}, 2 * n + 1).to(at::kDouble));
  }
  const int64_t channels = axis ? input.size(*axis) : 0;
  if (axis && abs.numel() / std::max<int64_t>(channels, 1) > 0) {
    at::Tensor per = abs.reshape(input.sizes()).movedim(*axis, 0).reshape({channels, -1});
    parts.push_back(std::get<0>(per.max(1)).to(at::kDouble));
    p.channels = channels;
  }
  p.packed = at::cat(parts);
  return p;
}

void FinishTensorStats(const double* v, PendingTensorStats* p) {
  TensorStats& s = p->stats;
  if (s.count == 0) return;
  const int64_t n = p->bins;
  s.nan_count = static_cast<int64_t>(v[0]);
  s.posinf_count = static_cast<int64_t>(v[1]);
  s.neginf_count = static_cast<int64_t>(v[2]);
  s.zero_count = static_cast<int64_t>(v[3]);
  // -0.0 and +0.0 compare equal, so which one min/max returns depends on the order: report +0.
  s.min = v[4] == 0 ? 0.0f : static_cast<float>(v[4]);
  s.max = v[5] == 0 ? 0.0f : static_cast<float>(v[5]);
  const double amax = v[6];
  const double* rest = v + 7;
  if (s.has_histogram) {
    if (amax > 0) {
      s.has_range = true;
      s.range_exp = RangeExpFor(amax, p->min_range_exp);
      for (int64_t i = 0; i < n; ++i) {
        s.positive[static_cast<size_t>(i)] = static_cast<int64_t>(rest[i]);
        s.negative[static_cast<size_t>(i)] = static_cast<int64_t>(rest[n + i]);
      }
    }
    rest += 2 * n + 1;
  }
  if (s.has_per_channel) {
    for (int64_t c = 0; c < p->channels; ++c)
      s.channel_amax[static_cast<size_t>(c)] = static_cast<float>(rest[c]);
    s.channel_nonfinite = s.nonfinite_count();
  }
}

Result<TensorStats> ComputeTensorStats(const at::Tensor& input, const TensorStatsRequest& request) {
  QK_ASSIGN_OR_RETURN(PendingTensorStats p, LaunchTensorStats(input, request));
  if (p.packed.defined()) {
    const at::Tensor host = p.packed.to(at::kCPU).contiguous();
    FinishTensorStats(host.data_ptr<double>(), &p);
  }
  return std::move(p.stats);
}

Result<TensorStats> ComputeTensorStats(const TensorView& view, const TensorStatsRequest& request,
                                       const Device& device) {
  QK_RETURN_IF_ERROR(CheckDeviceAvailable(device));
  at::ScalarType type;
  QK_RETURN_IF_NOT(ToScalarType(view.dtype, &type), StatusCode::kUnsupported,
                   "dtype {} has no calibration statistics", ir::DTypeName(view.dtype));
  try {
    at::Tensor host = view.numel() == 0
                          ? at::empty(view.shape, at::TensorOptions().dtype(type))
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
