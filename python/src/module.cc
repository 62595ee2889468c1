// quantkit._core: the compiled half of `import quantkit` (docs/python.md). The Python package
// (python/quantkit) holds the public API, the data adapters and the libtorch check; this module
// holds the bindings it calls, over the public C++ API (include/quantkit/).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "errors.h"
#include "quantkit/version.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "quantkit's compiled bindings; use the `quantkit` package, not this module.";
  m.attr("__version__") = QUANTKIT_VERSION;
  quantkit::python::RegisterErrors(m);
  quantkit::python::BindPlan(m);
  quantkit::python::BindStats(m);
  quantkit::python::BindCollector(m);
  quantkit::python::BindPipelines(m);
}
