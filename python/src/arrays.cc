#include "arrays.h"

#include <fmt/format.h>

#include "errors.h"

namespace py = pybind11;

namespace quantkit::python {
namespace {

// Owns one reference to a Python object whose memory an ir::Tensor views. The last ir::Tensor
// may be dropped while the GIL is released (inside a model run), so the reference is given back
// under the GIL.
class PyObjectBuffer final : public ir::Buffer {
 public:
  PyObjectBuffer(py::object owner, const uint8_t* data, size_t size)
      : owner_(owner.release().ptr()), data_(data), size_(size) {}
  ~PyObjectBuffer() override {
    py::gil_scoped_acquire gil;
    Py_XDECREF(owner_);
  }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  PyObject* owner_;
  const uint8_t* data_;
  size_t size_;
};

ir::DType DTypeOf(const py::dtype& dt, const std::string& what) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return ir::DType::kFloat;
  if (kind == 'f' && size == 8) return ir::DType::kDouble;
  if (kind == 'f' && size == 2) return ir::DType::kFloat16;
  if (kind == 'b' && size == 1) return ir::DType::kBool;
  if (kind == 'i' && size == 1) return ir::DType::kInt8;
  if (kind == 'i' && size == 2) return ir::DType::kInt16;
  if (kind == 'i' && size == 4) return ir::DType::kInt32;
  if (kind == 'i' && size == 8) return ir::DType::kInt64;
  if (kind == 'u' && size == 1) return ir::DType::kUint8;
  if (kind == 'u' && size == 2) return ir::DType::kUint16;
  if (kind == 'u' && size == 4) return ir::DType::kUint32;
  if (kind == 'u' && size == 8) return ir::DType::kUint64;
  throw StatusError(Status(StatusCode::kInvalidArgument,
                           fmt::format("{}: numpy dtype {} has no ONNX tensor type quantkit reads",
                                       what, py::repr(dt).cast<std::string>())));
}

}  // namespace

ir::Tensor TensorFromArray(py::handle obj, const std::string& what) {
  if (!py::isinstance<py::array>(obj)) {
    throw StatusError(Status(StatusCode::kInvalidArgument,
                             fmt::format("{}: expected a numpy array, got {}", what,
                                         py::type::of(obj).attr("__name__").cast<std::string>())));
  }
  // PyArray_FromAny with these flags returns the same array when it already qualifies (no copy).
  auto arr = py::array::ensure(obj, py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if (!arr) {
    throw StatusError(Status(StatusCode::kInvalidArgument,
                             fmt::format("{}: the array cannot be read as a C-contiguous array", what)));
  }
  const char order = arr.dtype().attr("byteorder").cast<std::string>()[0];
  if (order == '>') {  // big-endian data (np.dtype('>f4')): one native copy
    arr = py::array::ensure(arr.attr("astype")(arr.dtype().attr("newbyteorder")("=")), py::array::c_style);
  }
  const ir::DType dtype = DTypeOf(arr.dtype(), what);
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  const auto* data = static_cast<const uint8_t*>(arr.data());
  const size_t nbytes = static_cast<size_t>(arr.nbytes());
  auto buffer = std::make_shared<PyObjectBuffer>(std::move(arr), data, nbytes);
  return ir::Tensor(dtype, std::move(dims), std::move(buffer), 0);
}

std::vector<std::pair<std::string, ir::Tensor>> TensorsFromDict(const py::dict& arrays,
                                                                 const std::string& what) {
  std::vector<std::pair<std::string, ir::Tensor>> out;
  for (const auto& [key, value] : arrays) {
    if (!py::isinstance<py::str>(key)) {
      throw StatusError(Status(StatusCode::kInvalidArgument,
                               fmt::format("{}: keys must be model input names (str), got {}", what,
                                           py::repr(key).cast<std::string>())));
    }
    const std::string name = key.cast<std::string>();
    out.emplace_back(name, TensorFromArray(value, fmt::format("{}: input '{}'", what, name)));
  }
  return out;
}

}  // namespace quantkit::python
