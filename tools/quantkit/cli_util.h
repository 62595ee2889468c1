// What the subcommands share: printing a Status as one line with its documented exit code,
// parsing, and the option groups several subcommands take, each filling a public options struct
// (include/quantkit/). tools/ includes only public headers: the library does the work.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "quantkit/options.h"
#include "quantkit/pipelines.h"
#include "quantkit/status.h"

namespace quantkit::cli {

// What a subcommand runs once its options are parsed; returns the process exit code.
using RunFn = std::function<int()>;

// Prints "quantkit: <message>" to stderr for a failed status, control characters escaped
// (names come from untrusted files); returns its exit code (0 if OK).
int Report(const Status& status);

// Routes stdout through a filter that escapes control characters (quantkit/text.h EscapeControl)
// except newlines and tabs: every listing (inspect, summaries, tables, lint, cache) prints names
// taken from untrusted files, and none of them may move the cursor, clear the screen or retitle
// the terminal. JSON output is unaffected (its strings are escaped already).
void EscapeStdout();

// Parses the command line. Returns -1 to go on, or the exit code to return now: 0 after --help
// or --version, 2 (one line on stderr) for a parse error or a first word that is no subcommand
// (`quantkit nosuchcmd --help` must not print the main help and succeed).
int Parse(CLI::App& app, int argc, char** argv);

// The image preprocessing options of calibrate, eval, qat and data (docs/data-sources.md).
void AddImageOptions(CLI::App* cmd, ImagePreprocessing* image);

// --float-dtype, --cast-io, --keep-fp32, --weight-storage: the float part of every written Q/DQ
// model (calibrate, convert, fallback; docs/strongly-typed.md).
void AddFloatOptions(CLI::App* cmd, FloatOutputOptions* floats);

// --distributed and --dist-timeout, on the subcommands that run as N processes of one job
// (calibrate, eval, analyze, diagnose, fallback, qat; docs/distributed.md).
void AddDistributedOptions(CLI::App* cmd, DistributedOptions* options);

// The options analyze and fallback share: MODEL, --plan, --data, --samples, --batch-size,
// --placement and the distributed ones. `data_help` describes --data for the subcommand.
void AddPlanEvalOptions(CLI::App* cmd, PlanEvaluationOptions* options,
                        const std::string& data_help);

// A report's warnings on stderr ("quantkit: warning: ..."), and under a launch each rank's
// summary line (stderr keeps rank 0's stdout report clean for pipes).
void PrintWarnings(const std::vector<std::string>& warnings);
void PrintRankLine(const RankSummary& rank);

// Prints `text` on stdout as it is.
void Print(const std::string& text);

}  // namespace quantkit::cli
