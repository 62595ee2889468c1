// numpy arrays <-> ir::Tensor. A C-contiguous, aligned, native-byte-order array becomes an
// ir::Tensor that views the array's memory (no copy) and keeps the array alive; any other layout
// is copied once into a C-contiguous array first. (torch CPU tensors arrive as numpy arrays made
// by numpy.from_dlpack in python/quantkit/_data.py: also no copy.)
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace quantkit::python {

// `what` names the array in errors ("batch 3: input 'x'"). Throws StatusError for dtypes
// quantkit has no equivalent of (complex, object, strings). Needs the GIL.
ir::Tensor TensorFromArray(pybind11::handle array, const std::string& what);

// {name: array} -> [(name, tensor)], in the dict's order. Needs the GIL.
std::vector<std::pair<std::string, ir::Tensor>> TensorsFromDict(const pybind11::dict& arrays,
                                                                 const std::string& what);

}  // namespace quantkit::python
