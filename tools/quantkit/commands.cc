#include "commands.h"

namespace quantkit::cli {

// Add a subcommand: declare its Setup function here and call it below (explicit, no static
// self-registration).
void SetupInspect(CLI::App& app, RunFn* run);

void SetupRun(CLI::App& app, RunFn* run);

void RegisterCommands(CLI::App& app, RunFn* run) {
  SetupInspect(app, run);
  SetupRun(app, run);
}

}  // namespace quantkit::cli
