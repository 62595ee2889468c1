// QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21):
//   q = saturate(round_half_to_even(x / scale) + zero_point)     r = (q - zero_point) * scale
// per tensor (scalar scale), per axis (1-D scale along `axis`, 13+) or blocked (scale has the
// input's shape with dim `axis` divided by block_size, 21+). Saturation clamps to the output
// type's range [qmin, qmax]. Supported quantized types: int8, uint8, int16 (uint16, int4 and
// float8 have no ATen 1.13 dtype).
#include <ATen/Parallel.h>

#include "ir/float8.h"
#include "runtime/kernel.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/quant_loops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

// Broadcasts a scale / zero-point tensor against x for per-tensor, per-axis or blocked layouts.
at::Tensor Align(const at::Tensor& s_in, const at::Tensor& x, int64_t axis, int64_t block) {
  if (s_in.numel() == 1 && block == 0) return s_in.reshape({});
  const at::Tensor s =
      s_in.to(x.device());  // small per-channel zero points stay on the host (KeepOnHost)
  const int64_t a = NormAxis(axis, x.dim());
  if (s.dim() <= 1 && block == 0) {
    QK_KERNEL_CHECK(s.numel() == x.size(a), "per-axis scale has {} values, axis {} has size {}",
                    s.numel(), a, x.size(a));
    std::vector<int64_t> shape(x.dim(), 1);
    shape[a] = -1;
    return s.reshape(shape);
  }
  QK_KERNEL_CHECK(block > 0 && s.dim() == x.dim(),
                  "blocked scale of rank {} needs block_size > 0 and rank {}", s.dim(), x.dim());
  return s.repeat_interleave(block, a).narrow(a, 0, x.size(a));
}

// --- per-tensor fast paths (the fake quantization of every simulated activation) ---
// One vectorized pass (quant_loops.h) instead of five ATen passes and temporaries, with the same
// float operations in the same order, so the results are bit-identical to the general path below.

// Elements per parallel_for task: large enough that a task outweighs its scheduling.
constexpr int64_t kGrain = int64_t{1} << 15;

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

at::Tensor QuantizePerTensor(const at::Tensor& x_in, float scale, float zp, float lo, float hi,
                             at::ScalarType qt) {
  const at::Tensor x = DenseInEitherOrder(x_in);
  at::Tensor q = at::empty_like(x, x.options().dtype(qt));  // same memory order as x
  const float* src = x.data_ptr<float>();
  void* dst = q.data_ptr();
  at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (qt == at::kChar) {
      quant_loops::QuantizeToInt8(src + begin, static_cast<int8_t*>(dst) + begin, end - begin,
                                  scale, zp, lo, hi);
    } else {
      quant_loops::QuantizeToUint8(src + begin, static_cast<uint8_t*>(dst) + begin, end - begin,
                                   scale, zp, lo, hi);
    }
  });
  return q;
}

at::Tensor DequantizePerTensor(const at::Tensor& q_in, float scale, int32_t zp) {
  const at::Tensor q = DenseInEitherOrder(q_in);
  at::Tensor r = at::empty_like(q, q.options().dtype(at::kFloat));  // same memory order as q
  const void* src = q.data_ptr();
  float* dst = r.data_ptr<float>();
  const bool int8 = q.scalar_type() == at::kChar;
  at::parallel_for(0, q.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (int8) {
      quant_loops::DequantizeInt8(static_cast<const int8_t*>(src) + begin, dst + begin, end - begin,
                                  scale, zp);
    } else {
      quant_loops::DequantizeUint8(static_cast<const uint8_t*>(src) + begin, dst + begin,
                                   end - begin, scale, zp);
    }
  });
  return r;
}

// True when FakeQuantizeLinear may write its output over x: the interpreter handed x over at its
// last use (kernel.h) and nothing else holds the tensor or its buffer, which ATen allocated and x
// covers exactly. A fed tensor (wrapped caller memory: storage not resizable) is never written.
bool MayOverwrite(const at::Tensor& x) {
  return x.use_count() == 1 && x.storage().use_count() == 1 && x.storage().resizable() &&
         x.storage_offset() == 0 && x.storage().nbytes() == x.nbytes();
}

// Quantized type and range of a QuantizeLinear: the zero point's type, else output_dtype, else
// uint8.
struct QuantType {
  at::ScalarType type = at::kByte;
  double lo = 0, hi = 255;
};
QuantType QuantTypeOf(const KernelContext& c, at::ScalarType output_dtype) {
  QuantType t;
  t.type = c.has(2) ? c.in(2).scalar_type() : output_dtype;
  QK_KERNEL_CHECK(QuantRange(t.type, &t.lo, &t.hi), "unsupported quantized dtype {}",
                  c10::toString(t.type));
  return t;
}

// Per-tensor 8-bit parameters on the CPU: the vectorized loops apply.
bool PerTensor8Bit(const KernelContext& c, at::ScalarType qt, int64_t block) {
  return c.in(0).device().is_cpu() && IsScalarOf(c.in(1), at::kFloat) && block == 0 &&
         (qt == at::kChar || qt == at::kByte) && (!c.has(2) || c.in(2).numel() == 1);
}

at::Tensor Quantize(const KernelContext& c, const QuantType& qt, int64_t axis, int64_t block) {
  const at::Tensor& x = c.in(0);
  if (x.scalar_type() == at::kFloat && PerTensor8Bit(c, qt.type, block)) {
    const float zp = c.has(2) ? c.in(2).to(at::kFloat).item<float>() : 0.0f;
    return QuantizePerTensor(x, c.in(1).item<float>(), zp, static_cast<float>(qt.lo),
                             static_cast<float>(qt.hi), qt.type);
  }
  at::Tensor scale = Align(c.in(1), x, axis, block);
  // Divide in the scale's precision (float), like the reference implementation.
  at::Tensor q = at::round(x.to(scale.scalar_type()) / scale);
  if (c.has(2)) q = q + Align(c.in(2), x, axis, block).to(q.scalar_type());
  return at::clamp(q, qt.lo, qt.hi).to(qt.type);
}

// Dequantizes `q` with the scale and zero point inputs (1, 2) of `c`.
at::Tensor Dequantize(const at::Tensor& q, const KernelContext& c, int64_t axis, int64_t block) {
  if ((q.scalar_type() == at::kChar || q.scalar_type() == at::kByte) &&
      PerTensor8Bit(c, q.scalar_type(), block)) {
    const int32_t zp = c.has(2) ? c.in(2).to(at::kInt).item<int32_t>() : 0;
    return DequantizePerTensor(q, c.in(1).item<float>(), zp);
  }
  at::Tensor scale = Align(c.in(1), q, axis, block);
  at::Tensor v = q.to(at::kInt);
  if (c.has(2)) v = v - Align(c.in(2), q, axis, block).to(at::kInt);
  return v.to(scale.scalar_type()) * scale;
}

Status CheckZeroPointType(const KernelInit& init) {
  if (const ir::Value* zp = init.node.input(2);
      zp && zp->type.is_tensor() && zp->type.dtype != ir::DType::kUndefined) {
    switch (zp->type.dtype) {
      case ir::DType::kUint8:
      case ir::DType::kInt8:
      case ir::DType::kInt16:
        break;
      default:
        return init.Error(StatusCode::kUnsupported, "zero point '{}' has unsupported dtype {}",
                          zp->name(), ir::DTypeName(zp->type.dtype));
    }
  }
  return Status::Ok();
}

Result<KernelPtr> MakeQuantize(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  const int64_t block = init.node.GetInt("block_size", 0);
  const int64_t output_dtype = init.node.GetInt("output_dtype", 0);
  at::ScalarType out_type = at::kByte;
  if (output_dtype != 0 && !OnnxToScalarType(output_dtype, &out_type)) {
    return init.Error(StatusCode::kUnsupported, "output_dtype {} is not supported", output_dtype);
  }
  QK_RETURN_IF_ERROR(CheckZeroPointType(init));
  return MakeKernel(
      [=](KernelContext& c) { return Out{Quantize(c, QuantTypeOf(c, out_type), axis, block)}; });
}

Result<KernelPtr> MakeDequantize(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  const int64_t block = init.node.GetInt("block_size", 0);
  return MakeKernel([=](KernelContext& c) { return Out{Dequantize(c.in(0), c, axis, block)}; });
}

// com.quantkit::FakeQuantizeLinear(x, scale[, zero_point]) = DequantizeLinear(QuantizeLinear(x,
// scale, zero_point), scale, zero_point), per tensor (passes/fuse_activation_qdq.h writes it for
// a simulation). On the CPU with 8-bit types, one pass without the 8-bit intermediate, in place
// when the interpreter hands x over; elsewhere the two kernels' computations in turn.
Result<KernelPtr> MakeFakeQuantizeLinear(const KernelInit& init) {
  QK_RETURN_IF_ERROR(CheckZeroPointType(init));
  return MakeKernel([](KernelContext& c) {
    const QuantType qt = QuantTypeOf(c, at::kByte);
    const at::Tensor& x = c.in(0);
    if (x.scalar_type() == at::kFloat && PerTensor8Bit(c, qt.type, 0)) {
      const float scale = c.in(1).item<float>();
      const float zp = c.has(2) ? c.in(2).to(at::kFloat).item<float>() : 0.0f;
      // In place when allowed: one pass over memory already in use, no new activation buffer.
      const bool overwrite =
          MayOverwrite(x) && (x.is_contiguous() || x.is_contiguous(at::MemoryFormat::ChannelsLast));
      const at::Tensor src = DenseInEitherOrder(x);
      at::Tensor out = overwrite ? src : at::empty_like(src);  // same memory order as src
      const float* in = src.data_ptr<float>();
      float* dst = out.data_ptr<float>();
      at::parallel_for(0, src.numel(), kGrain, [&](int64_t begin, int64_t end) {
        quant_loops::FakeQuantize(in + begin, dst + begin, end - begin, scale, zp,
                                  static_cast<float>(qt.lo), static_cast<float>(qt.hi));
      });
      return Out{out};
    }
    return Out{Dequantize(Quantize(c, qt, 1, 0), c, 1, 0)};
  });
}

// com.quantkit::FakeQuantizeE4M3(x, scale_q, scale_dq; axis) = DequantizeLinear(QuantizeLinear(x,
// scale_q, float8e4m3fn 0), scale_dq): decode(encode(x / scale_q)) * scale_dq with ir/float8.h's
// encode (round to nearest even, saturation to +-448) and decode, per tensor or along `axis`,
// in float32, the result in scale_dq's dtype (DequantizeLinear's output type). Written by
// passes/lower_float8.h for FP8 Q/DQ models: the interpreter has no FP8 dtype.
Result<KernelPtr> MakeFakeQuantizeE4M3(const KernelInit& init) {
  const int64_t axis = init.node.GetInt("axis", 1);
  return MakeKernel([=](KernelContext& c) {
    const at::Tensor x = c.in(0).to(at::kFloat);
    // The division on the input's device, the 8-bit rounding on the host.
    at::Tensor q = at::div(x, Align(c.in(1).to(at::kFloat), x, axis, 0)).to(at::kCPU).contiguous();
    float* p = q.data_ptr<float>();
    at::parallel_for(0, q.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        p[i] = ir::Float8E4M3FNToFloat(ir::FloatToFloat8E4M3FN(p[i]));
      }
    });
    const at::Tensor decoded = q.to(x.device());
    const at::Tensor out = at::mul(decoded, Align(c.in(2).to(at::kFloat), decoded, axis, 0));
    return Out{out.to(c.in(2).scalar_type())};
  });
}

}  // namespace

void AppendQuantKernels(KernelTable& t) {
  t.push_back({"", "QuantizeLinear", 10, kLatestOpset, MakeQuantize});
  t.push_back({"", "DequantizeLinear", 10, kLatestOpset, MakeDequantize});
  t.push_back({"com.quantkit", "FakeQuantizeLinear", 1, kLatestOpset, MakeFakeQuantizeLinear});
  t.push_back({"com.quantkit", "FakeQuantizeE4M3", 1, kLatestOpset, MakeFakeQuantizeE4M3});
}

}  // namespace quantkit::runtime
