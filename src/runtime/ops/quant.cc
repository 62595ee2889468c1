// QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21):
//   q = saturate(round_half_to_even(x / scale) + zero_point)     r = (q - zero_point) * scale
// per tensor (scalar scale), per axis (1-D scale along `axis`, 13+) or blocked (scale has the
// input's shape with dim `axis` divided by block_size, 21+). Saturation clamps to the output
// type's range [qmin, qmax]. Supported quantized types: int8, uint8, int16 (uint16, int4 and
// float8 have no ATen 1.13 dtype).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// Broadcasts a scale / zero-point tensor against x for per-tensor, per-axis or blocked layouts.
at::Tensor Align(const at::Tensor& s, const at::Tensor& x, int64_t axis, int64_t block) {
  if (s.numel() == 1 && block == 0) return s.reshape({});
  const int64_t a = NormAxis(axis, x.dim());
  if (s.dim() <= 1 && block == 0) {
    QK_KERNEL_CHECK(s.numel() == x.size(a), "per-axis scale has {} values, axis {} has size {}",
                    s.numel(), a, x.size(a));
    std::vector<int64_t> shape(x.dim(), 1);
    shape[a] = -1;
    return s.reshape(shape);
  }
  QK_KERNEL_CHECK(block > 0 && s.dim() == x.dim(), "blocked scale of rank {} needs block_size > 0 and rank {}",
                  s.dim(), x.dim());
  return s.repeat_interleave(block, a).narrow(a, 0, x.size(a));
}

// --- per-tensor fast paths (the fake quantization of every simulated activation) ---
// One fused pass instead of five ATen passes and temporaries, with the same float operations in
// the same order (divide, round half to even, add the zero point in float, clamp, truncate), so
// the results are bit-identical to the general path below.

bool IsScalarOf(const at::Tensor& t, at::ScalarType type) {
  return t.defined() && t.numel() == 1 && t.scalar_type() == type;
}

// The tensor itself when its buffer is dense in NCHW or channels-last order (an elementwise pass
// over the buffer then works in either; the result keeps that order, so a channels-last run
// does not reorder around every Q/DQ), else an NCHW-contiguous copy.
at::Tensor DenseInEitherOrder(const at::Tensor& t) {
  const bool channels_last = t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast);
  return t.is_contiguous() || channels_last ? t : t.contiguous();
}

template <typename Q>
at::Tensor QuantizePerTensor(const at::Tensor& x_in, float scale, float zp, float lo, float hi,
                             at::ScalarType qt) {
  const at::Tensor x = DenseInEitherOrder(x_in);
  at::Tensor q = at::empty_like(x, x.options().dtype(qt));  // same memory order as x
  const float* src = x.data_ptr<float>();
  Q* dst = q.data_ptr<Q>();
  at::parallel_for(0, x.numel(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = std::nearbyint(src[i] / scale) + zp;
      dst[i] = static_cast<Q>(static_cast<int32_t>(std::min(std::max(v, lo), hi)));
    }
  });
  return q;
}

template <typename Q>
at::Tensor DequantizePerTensor(const at::Tensor& q_in, float scale, int32_t zp) {
  const at::Tensor q = DenseInEitherOrder(q_in);
  at::Tensor r = at::empty_like(q, q.options().dtype(at::kFloat));  // same memory order as q
  const Q* src = q.data_ptr<Q>();
  float* dst = r.data_ptr<float>();
  at::parallel_for(0, q.numel(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = static_cast<float>(static_cast<int32_t>(src[i]) - zp) * scale;
  });
  return r;
}

Result<KernelPtr> MakeQuantize(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  const int64_t block = init.node.GetInt("block_size", 0);
  const int64_t output_dtype = init.node.GetInt("output_dtype", 0);
  at::ScalarType out_type = at::kByte;
  if (output_dtype != 0 && !OnnxToScalarType(output_dtype, &out_type)) {
    return init.Error(StatusCode::kUnsupported, "output_dtype {} is not supported", output_dtype);
  }
  if (const ir::Value* zp = init.node.input(2); zp && zp->type.is_tensor() &&
      zp->type.dtype != ir::DType::kUndefined) {
    switch (zp->type.dtype) {
      case ir::DType::kUint8: case ir::DType::kInt8: case ir::DType::kInt16: break;
      default:
        return init.Error(StatusCode::kUnsupported, "zero point '{}' has unsupported dtype {}",
                          zp->name(), ir::DTypeName(zp->type.dtype));
    }
  }
  const bool has_output_dtype = output_dtype != 0;
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::ScalarType qt = c.has(2) ? c.in(2).scalar_type() : out_type;
    if (!c.has(2) && !has_output_dtype) qt = at::kByte;
    double lo, hi;
    QK_KERNEL_CHECK(QuantRange(qt, &lo, &hi), "unsupported quantized dtype {}", c10::toString(qt));
    if (x.device().is_cpu() && x.scalar_type() == at::kFloat && IsScalarOf(c.in(1), at::kFloat) && block == 0 &&
        (qt == at::kChar || qt == at::kByte) && (!c.has(2) || c.in(2).numel() == 1)) {
      const float scale = c.in(1).item<float>();
      const float zp = c.has(2) ? c.in(2).to(at::kFloat).item<float>() : 0.0f;
      const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
      return Out{qt == at::kChar ? QuantizePerTensor<int8_t>(x, scale, zp, flo, fhi, qt)
                                 : QuantizePerTensor<uint8_t>(x, scale, zp, flo, fhi, qt)};
    }
    at::Tensor scale = Align(c.in(1), x, axis, block);
    // Divide in the scale's precision (float), like the reference implementation.
    at::Tensor q = at::round(x.to(scale.scalar_type()) / scale);
    if (c.has(2)) q = q + Align(c.in(2), x, axis, block).to(q.scalar_type());
    return Out{at::clamp(q, lo, hi).to(qt)};
  });
}

Result<KernelPtr> MakeDequantize(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  const int64_t block = init.node.GetInt("block_size", 0);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    if (x.device().is_cpu() && (x.scalar_type() == at::kChar || x.scalar_type() == at::kByte) &&
        IsScalarOf(c.in(1), at::kFloat) &&
        block == 0 && (!c.has(2) || c.in(2).numel() == 1)) {
      const float scale = c.in(1).item<float>();
      const int32_t zp = c.has(2) ? c.in(2).to(at::kInt).item<int32_t>() : 0;
      return Out{x.scalar_type() == at::kChar ? DequantizePerTensor<int8_t>(x, scale, zp)
                                              : DequantizePerTensor<uint8_t>(x, scale, zp)};
    }
    at::Tensor scale = Align(c.in(1), x, axis, block);
    at::Tensor v = x.to(at::kInt);
    if (c.has(2)) v = v - Align(c.in(2), x, axis, block).to(at::kInt);
    return Out{v.to(scale.scalar_type()) * scale};
  });
}

}  // namespace

void AppendQuantKernels(KernelTable& t) {
  t.push_back({"", "QuantizeLinear", 10, kLatestOpset, MakeQuantize});
  t.push_back({"", "DequantizeLinear", 10, kLatestOpset, MakeDequantize});
}

}  // namespace quantkit::runtime
