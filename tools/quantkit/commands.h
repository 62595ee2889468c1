// The list of subcommands. Each cmd_<name>.cc defines one Setup function that adds its
// subcommand to `app` and sets *run when that subcommand is chosen.
#pragma once

#include "cli_util.h"

namespace quantkit::cli {

void RegisterCommands(CLI::App& app, RunFn* run);

}  // namespace quantkit::cli
