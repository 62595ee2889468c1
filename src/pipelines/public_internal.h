// Conversions shared by the public API's implementation files (public_calibration.cc,
// public_pipelines.cc); not part of the public API.
#pragma once

#include "data/image_options.h"
#include "quantkit/data_source.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

// The declared preprocessing as text (the CLI's option strings) -> data::ImageOptions.
Result<data::ImageOptions> ToImageOptions(const ImagePreprocessing& preprocessing);

}  // namespace quantkit::pipelines
