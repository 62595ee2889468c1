#include "commands.h"

namespace quantkit::cli {

// Add a subcommand: implement Setup<Name> in cmd_<name>.cc, declare it here and call it below
// (explicit, no static self-registration). Order = order in --help.
void SetupCalibrate(CLI::App& app, RunFn* run);
void SetupDiagnose(CLI::App& app, RunFn* run);
void SetupEval(CLI::App& app, RunFn* run);
void SetupAnalyze(CLI::App& app, RunFn* run);
void SetupFallback(CLI::App& app, RunFn* run);
void SetupData(CLI::App& app, RunFn* run);
void SetupConvert(CLI::App& app, RunFn* run);
void SetupLint(CLI::App& app, RunFn* run);
void SetupCache(CLI::App& app, RunFn* run);
void SetupInspect(CLI::App& app, RunFn* run);
void SetupTensorCalib(CLI::App& app, RunFn* run);
void SetupRun(CLI::App& app, RunFn* run);
void SetupQat(CLI::App& app, RunFn* run);

void RegisterCommands(CLI::App& app, RunFn* run) {
  SetupCalibrate(app, run);
  SetupDiagnose(app, run);
  SetupEval(app, run);
  SetupAnalyze(app, run);
  SetupFallback(app, run);
  SetupQat(app, run);
  SetupData(app, run);
  SetupConvert(app, run);
  SetupLint(app, run);
  SetupCache(app, run);
  SetupInspect(app, run);
  SetupTensorCalib(app, run);
  SetupRun(app, run);
}

}  // namespace quantkit::cli
