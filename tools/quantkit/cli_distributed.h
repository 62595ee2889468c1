// --distributed and --dist-timeout, shared by the subcommands that run as N processes of one job
// (calibrate, eval; docs/distributed.md), and the per-rank summary line.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <memory>

#include "analysis/distributed.h"

namespace quantkit::cli {

// Fills *options as the options are parsed (the pointer must outlive parsing).
void AddDistributedOptions(CLI::App* cmd, analysis::DistributedOptions* options);

// Prints this rank's one summary line (stderr keeps rank 0's stdout report clean for pipes).
void PrintRankLine(const analysis::RankReport& report);

}  // namespace quantkit::cli
