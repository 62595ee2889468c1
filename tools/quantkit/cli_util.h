// Small helpers shared by the subcommands: printing a Status as one line and mapping it to the
// documented exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "data/image_options.h"
#include "quantkit/status.h"

namespace quantkit::cli {

// What a subcommand runs once its options are parsed; returns the process exit code.
using RunFn = std::function<int()>;

// Prints "quantkit: <message>" to stderr for a failed status; returns its exit code (0 if OK).
int Report(const Status& status);

// The image preprocessing options shared by calibrate, eval and data (data/image_options.h).
struct ImageArgs {
  std::string resize, crop, color, layout, mean, std;
  double scale = 0;  // 0: not given
};
void AddImageOptions(CLI::App* cmd, ImageArgs* args);
Result<data::ImageOptions> ToImageOptions(const ImageArgs& args);

}  // namespace quantkit::cli
