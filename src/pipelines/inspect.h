// `quantkit inspect MODEL`: what a model is made of (versions, producer, inputs/outputs with
// dtypes and symbolic shapes, op histogram, weights and where they live), as text and JSON.
#pragma once

#include <string>

#include "quantkit/status.h"

namespace quantkit::pipelines {

struct ModelInspection {
  std::string text;
  std::string json;  // keys sorted, newline-terminated
};

Result<ModelInspection> InspectModel(const std::string& path);

}  // namespace quantkit::pipelines
