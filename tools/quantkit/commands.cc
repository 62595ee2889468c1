#include "commands.h"

namespace quantkit::cli {

// Add a subcommand: declare its Setup function here and call it below (explicit, no static
// self-registration).

void RegisterCommands(CLI::App& app, RunFn* run) {
  (void)app;
  (void)run;
}

}  // namespace quantkit::cli
