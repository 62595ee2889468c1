// --device cpu|cuda[:N] on the subcommands that run models (docs/gpu.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "quantkit/status.h"

namespace quantkit::cli {

// The subcommands that run a model: run, calibrate, eval, analyze, fallback, diagnose, qat.
inline constexpr const char* kDeviceSubcommands[] = {"run",      "calibrate", "eval", "analyze",
                                                     "fallback", "diagnose",  "qat"};

// Adds --device (also QUANTKIT_DEVICE) to each of kDeviceSubcommands registered on `app`.
void AddDeviceOptions(CLI::App& app, std::string* device);

// After parsing: selects the device for every model run (quantkit/options.h SetDevice) and, on a
// GPU, raises the default --batch-size of the chosen subcommand to kGpuDefaultBatchSize when the
// user gave none (not for qat: there the batch size is a training hyper-parameter).
Status ApplyDeviceOption(CLI::App& app, const std::string& device);

}  // namespace quantkit::cli
