#include "errors.h"

namespace py = pybind11;

namespace quantkit::python {

void RegisterErrors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // The exception classes live in Python (quantkit/errors.py) so users can import, subclass
      // and document them; errors.from_status picks the class for the code.
      const Status& s = e.status();
      py::object make = py::module_::import("quantkit.errors").attr("from_status");
      py::object exc = make(StatusCodeName(s.code()), ExitCodeFor(s.code()), s.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  m.def(
      "_raise_status",
      [](int code, const std::string& message) {
        throw StatusError(Status(static_cast<StatusCode>(code), message));
      },
      "Raises the exception a failed Status of this code becomes (tests).");
}

}  // namespace quantkit::python
