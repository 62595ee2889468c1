#include "arrays.h"

#include <fmt/format.h>

#include <memory>
#include <utility>
#include <vector>

#include "errors.h"

namespace py = pybind11;

namespace quantkit::python {
namespace {

// One reference to a Python object whose memory a view reads. The last holder may let go while
// the GIL is released (inside a model run), so the reference is given back under the GIL.
std::shared_ptr<const void> HoldReference(py::object owner) {
  PyObject* ref = owner.release().ptr();
  return std::shared_ptr<const void>(ref, [](const void* p) {
    py::gil_scoped_acquire gil;
    Py_XDECREF(static_cast<PyObject*>(const_cast<void*>(p)));
  });
}

ElementType ElementTypeOf(const py::dtype& dt, const std::string& what) {
  struct NumpyType {
    char kind;  // numpy's dtype.kind
    int64_t itemsize;
    ElementType type;
  };
  static constexpr NumpyType kTypes[] = {
      {'f', 4, ElementType::kFloat32}, {'f', 8, ElementType::kFloat64},
      {'f', 2, ElementType::kFloat16}, {'b', 1, ElementType::kBool},
      {'i', 1, ElementType::kInt8},    {'i', 2, ElementType::kInt16},
      {'i', 4, ElementType::kInt32},   {'i', 8, ElementType::kInt64},
      {'u', 1, ElementType::kUint8},   {'u', 2, ElementType::kUint16},
      {'u', 4, ElementType::kUint32},  {'u', 8, ElementType::kUint64}};
  for (const NumpyType& t : kTypes) {
    if (dt.kind() == t.kind && static_cast<int64_t>(dt.itemsize()) == t.itemsize) return t.type;
  }
  throw StatusError(Status(StatusCode::kInvalidArgument,
                           fmt::format("{}: numpy dtype {} has no ONNX tensor type quantkit reads",
                                       what, py::repr(dt).cast<std::string>())));
}

}  // namespace

ArrayView ViewOfArray(py::handle obj, const std::string& what) {
  if (!py::isinstance<py::array>(obj)) {
    throw StatusError(Status(StatusCode::kInvalidArgument,
                             fmt::format("{}: expected a numpy array, got {}", what,
                                         py::type::of(obj).attr("__name__").cast<std::string>())));
  }
  // PyArray_FromAny with these flags returns the same array when it already qualifies (no copy).
  auto arr = py::array::ensure(obj, py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if (!arr) {
    throw StatusError(
        Status(StatusCode::kInvalidArgument,
               fmt::format("{}: the array cannot be read as a C-contiguous array", what)));
  }
  const char order = arr.dtype().attr("byteorder").cast<std::string>()[0];
  if (order == '>') {  // big-endian data (np.dtype('>f4')): one native copy
    arr = py::array::ensure(arr.attr("astype")(arr.dtype().attr("newbyteorder")("=")),
                            py::array::c_style);
  }
  ArrayView view;
  view.type = ElementTypeOf(arr.dtype(), what);
  view.shape.assign(arr.shape(), arr.shape() + arr.ndim());
  view.data = arr.data();
  view.keep_alive = HoldReference(std::move(arr));
  return view;
}

InputBatch BatchFromDict(const py::dict& arrays, const std::string& what) {
  InputBatch batch;
  for (const auto& [key, value] : arrays) {
    if (!py::isinstance<py::str>(key)) {
      throw StatusError(Status(StatusCode::kInvalidArgument,
                               fmt::format("{}: keys must be model input names (str), got {}", what,
                                           py::repr(key).cast<std::string>())));
    }
    const std::string name = key.cast<std::string>();
    batch.inputs[name] = ViewOfArray(value, fmt::format("{}: input '{}'", what, name));
  }
  return batch;
}

}  // namespace quantkit::python
