// --distributed and --dist-timeout, shared by the subcommands that run as N processes of one job
// (calibrate, eval, analyze, diagnose, fallback, qat; docs/distributed.md), and the per-rank
// summary line.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "quantkit/calibration.h"

namespace quantkit::cli {

// Fills *options as the options are parsed (the pointer must outlive parsing).
void AddDistributedOptions(CLI::App* cmd, DistributedChoices* options);

// Under a distributed launch (WORLD_SIZE > 1) only the subcommands above share the work; any other
// subcommand would run N copies writing the same outputs, so it is refused (kUnsupported).
Status CheckDistributedLaunch(const CLI::App& app);

// Prints this rank's one summary line, a report's rank_line, when there is one (under a launch;
// stderr keeps rank 0's stdout report clean for pipes).
void PrintRankLine(const std::string& line);

}  // namespace quantkit::cli
