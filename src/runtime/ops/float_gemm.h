// Float matrix products on the CPU through oneDNN's sgemm (dnnl_sgemm) where the build has it
// (QUANTKIT_HAVE_DNNL: the libdnnl Debian's libtorch links), else ATen's at::mm / at::matmul.
//
// Why not at::mm: behind Debian's libtorch it is OpenBLAS 0.3.21, whose sgemm reaches 121 GFLOP/s
// on one thread of this AVX-512 AMD EPYC for vit_b_16's [1576, 768] x [768, 3072], where oneDNN's
// reaches 252 and onnxruntime's MLAS 243 (docs/performance.md section 12). Transformers spend
// most of their time there.
//
// Under autograd (QAT's training mode, an input requiring a gradient) the ATen ops are used, so
// that the backward pass exists. Results are deterministic for a given shape and thread count.
#pragma once

#include <ATen/ATen.h>

namespace quantkit::runtime {

// a [M, K] x b [K, N]; either may be a transposed view of a row-major matrix.
at::Tensor MatMul2d(const at::Tensor& a, const at::Tensor& b);

// ONNX MatMul (numpy matmul semantics): products of 2-D weights with [..., K] activations and
// batched products with equal batch dimensions go through MatMul2d; the rest through at::matmul.
at::Tensor MatMul(const at::Tensor& a, const at::Tensor& b);

}  // namespace quantkit::runtime
