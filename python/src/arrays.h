// numpy arrays -> the public quantkit::ArrayView / InputBatch (quantkit/data_source.h). A
// C-contiguous, aligned, native-byte-order array is viewed in place (no copy) and kept alive by
// the view; any other layout is copied once into a C-contiguous array first. (torch CPU tensors
// arrive as numpy arrays made by numpy.from_dlpack in python/quantkit/_data.py: also no copy.)
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "quantkit/data_source.h"

namespace quantkit::python {

// `what` names the array in errors ("batch 3: input 'x'"). Throws StatusError for dtypes
// quantkit has no equivalent of (complex, object, strings). Needs the GIL; the view's keep_alive
// may be released without it (it takes the GIL to drop its reference).
ArrayView ViewOfArray(pybind11::handle array, const std::string& what);

// {name: array} -> InputBatch. Needs the GIL.
InputBatch BatchFromDict(const pybind11::dict& arrays, const std::string& what);

}  // namespace quantkit::python
