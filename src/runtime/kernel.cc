#include "runtime/kernel.h"

namespace quantkit::runtime {

std::string DisplayName(const ir::Node& node) {
  if (!node.name.empty() || !node.output(0)) return node.name;
  return "<producing " + node.output(0)->name() + ">";
}

std::string DescribeNode(const ir::Node& node, int64_t opset) {
  const std::string op =
      node.domain().empty() ? node.op_type() : node.domain() + "::" + node.op_type();
  return fmt::format("node '{}' ({}, opset {})", DisplayName(node), op, opset);
}

std::string KernelInit::Where() const { return DescribeNode(node, opset); }

std::string KernelInit::InputName(size_t i) const {
  const ir::Value* v = node.input(i);
  return v ? v->name() : std::string();
}

const ir::Tensor* KernelInit::ConstInput(size_t i) const {
  const ir::Value* v = node.input(i);
  if (v == nullptr || !v->is_constant() || !v->initializer) return nullptr;
  return &*v->initializer;
}

int64_t NormAxis(int64_t axis, int64_t rank) {
  QK_KERNEL_CHECK(axis >= -rank && axis < std::max<int64_t>(rank, 1),
                  "axis {} is out of range for rank {}", axis, rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> ToInt64Vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kLong).contiguous().reshape({-1});
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::vector<double> ToDoubleVector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous().reshape({-1});
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

at::Tensor CenterZeroPoint(const at::Tensor& q, const at::Tensor& zp, int64_t axis) {
  at::Tensor v = q.to(at::kDouble);
  if (!zp.defined()) return v;
  at::Tensor z = zp.to(at::kDouble);
  if (z.numel() == 1) return v - z.reshape({});
  std::vector<int64_t> shape(q.dim(), 1);
  shape[NormAxis(axis, q.dim())] = -1;
  return v - z.reshape(shape);
}

bool QuantRange(at::ScalarType t, double* lo, double* hi) {
  switch (t) {
    case at::kByte:
      *lo = 0;
      *hi = 255;
      return true;
    case at::kChar:
      *lo = -128;
      *hi = 127;
      return true;
    case at::kShort:
      *lo = -32768;
      *hi = 32767;
      return true;
    case at::kInt:
      *lo = -2147483648.0;
      *hi = 2147483647.0;
      return true;
    default:
      return false;
  }
}

at::Tensor Requantize(const at::Tensor& real, const at::Tensor& y_scale,
                      const at::Tensor& y_zero_point) {
  double lo, hi;
  QK_KERNEL_CHECK(QuantRange(y_zero_point.scalar_type(), &lo, &hi),
                  "unsupported quantized dtype {}", c10::toString(y_zero_point.scalar_type()));
  at::Tensor y = at::round(real / y_scale.to(at::kDouble)) + y_zero_point.to(at::kDouble);
  return at::clamp(y, lo, hi).to(y_zero_point.scalar_type());
}

bool OnnxToScalarType(int64_t onnx_dtype, at::ScalarType* out) {
  switch (onnx_dtype) {
    case 1:
      *out = at::kFloat;
      return true;
    case 2:
      *out = at::kByte;
      return true;
    case 3:
      *out = at::kChar;
      return true;
    case 5:
      *out = at::kShort;
      return true;
    case 6:
      *out = at::kInt;
      return true;
    case 7:
      *out = at::kLong;
      return true;
    case 9:
      *out = at::kBool;
      return true;
    case 10:
      *out = at::kHalf;
      return true;
    case 11:
      *out = at::kDouble;
      return true;
    case 16:
      *out = at::kBFloat16;
      return true;
    default:
      return false;
  }
}

}  // namespace quantkit::runtime
