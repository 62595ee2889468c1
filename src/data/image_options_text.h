// Image options given as text, the way the CLI (--resize, --center-crop, ...) and the public
// quantkit::ImagePreprocessing take them, parsed in one place (data/image_options.h holds the
// parsed options and the per-option Set* functions the JSON data config uses).
#pragma once

#include <optional>
#include <string>

#include "data/image_options.h"
#include "quantkit/status.h"

namespace quantkit::data {

// Empty / nullopt: not given.
struct ImageOptionsText {
  std::string resize, center_crop, color, layout, mean, std;
  std::optional<double> scale;
};

// The one parser of image options given as text (the JSON data config applies its typed values
// with the Set* functions of image_options.h). Errors name the option (--mean, --resize, ...).
Result<ImageOptions> ParseImageOptions(const ImageOptionsText& text);

}  // namespace quantkit::data
