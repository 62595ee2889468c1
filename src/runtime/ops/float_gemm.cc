#include "runtime/ops/float_gemm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef QUANTKIT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace quantkit::runtime {
namespace {

#ifdef QUANTKIT_HAVE_DNNL
// Row-major gemm operand: 'N' with leading dimension stride(0), or 'T' (a transposed view of a
// row-major matrix) with leading dimension stride(1). False for other strides.
bool GemmOperand(const at::Tensor& t, char* trans, int64_t* ld) {
  if (t.stride(1) == 1 && t.stride(0) >= std::max<int64_t>(1, t.size(1))) {
    *trans = 'N';
    *ld = t.stride(0);
    return true;
  }
  if (t.stride(0) == 1 && t.stride(1) >= std::max<int64_t>(1, t.size(0))) {
    *trans = 'T';
    *ld = t.stride(1);
    return true;
  }
  return false;
}
#endif

bool DnnlApplies(const at::Tensor& a, const at::Tensor& b) {
#ifdef QUANTKIT_HAVE_DNNL
  const bool grad = at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
  return !grad && a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == at::kFloat &&
         b.scalar_type() == at::kFloat && a.numel() > 0 && b.numel() > 0;
#else
  (void)a;
  (void)b;
  return false;
#endif
}

// c = a x b into the row-major [M, N] buffer at c; false when oneDNN refused (the caller falls
// back).
bool DnnlGemm(const at::Tensor& a_in, const at::Tensor& b_in, float* c) {
#ifdef QUANTKIT_HAVE_DNNL
  at::Tensor a = a_in, b = b_in;
  char ta = 'N', tb = 'N';
  int64_t lda = 0, ldb = 0;
  if (!GemmOperand(a, &ta, &lda)) {
    a = a.contiguous();
    GemmOperand(a, &ta, &lda);
  }
  if (!GemmOperand(b, &tb, &ldb)) {
    b = b.contiguous();
    GemmOperand(b, &tb, &ldb);
  }
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  return dnnl_sgemm(ta, tb, m, n, k, 1.0f, a.data_ptr<float>(), lda, b.data_ptr<float>(), ldb, 0.0f,
                    c, n) == dnnl_success;
#else
  (void)a_in;
  (void)b_in;
  (void)c;
  return false;
#endif
}

}  // namespace

at::Tensor MatMul2d(const at::Tensor& a, const at::Tensor& b) {
  if (DnnlApplies(a, b)) {
    at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
    if (DnnlGemm(a, b, c.data_ptr<float>())) return c;
  }
  return at::mm(a, b);
}

at::Tensor MatMul(const at::Tensor& a, const at::Tensor& b) {
  if (!DnnlApplies(a, b) || a.dim() < 2 || b.dim() < 2 || a.size(-1) != b.size(-2))
    return at::matmul(a, b);
  const int64_t k = a.size(-1), n = b.size(-1);
  std::vector<int64_t> out_shape(a.sizes().begin(), a.sizes().end() - 1);
  out_shape.push_back(n);
  if (b.dim() == 2) {  // [..., K] x [K, N]: one product over all rows
    return MatMul2d(a.reshape({-1, k}), b).view(out_shape);
  }
  if (a.dim() != b.dim() || a.sizes().slice(0, a.dim() - 2) != b.sizes().slice(0, b.dim() - 2)) {
    return at::matmul(a, b);  // broadcast batch dimensions
  }
  const int64_t m = a.size(-2);
  const at::Tensor a3 = a.reshape({-1, m, k}), b3 = b.reshape({-1, k, n});
  at::Tensor c = at::empty({a3.size(0), m, n}, a.options());
  float* out = c.data_ptr<float>();
  for (int64_t i = 0; i < a3.size(0); ++i) {
    if (!DnnlGemm(a3[i], b3[i], out + i * m * n)) return at::matmul(a, b);
  }
  return c.view(out_shape);
}

}  // namespace quantkit::runtime
