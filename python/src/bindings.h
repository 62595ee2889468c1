// The parts of quantkit._core, each binding the public API (include/quantkit/) only
// (scripts/check_layers.py).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "quantkit/calibration.h"

namespace quantkit::python {

void BindPlan(pybind11::module_& m);
void BindStats(pybind11::module_& m);
void BindCollector(pybind11::module_& m);
void BindPipelines(pybind11::module_& m);

// The Python API's `exclude` and `weights` as the CLI's --exclude reads them: each name is a node
// name or an op type (both sets get it).
Placement PlacementFrom(const std::vector<std::string>& exclude, bool per_channel);

}  // namespace quantkit::python
