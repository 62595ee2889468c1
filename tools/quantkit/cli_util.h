// Small helpers shared by the subcommands: printing a Status as one line and mapping it to the
// documented exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quantkit/data_source.h"
#include "quantkit/pipelines.h"
#include "quantkit/status.h"

namespace quantkit::cli {

// What a subcommand runs once its options are parsed; returns the process exit code.
using RunFn = std::function<int()>;

// Prints "quantkit: <message>" to stderr for a failed status, control characters escaped
// (names come from untrusted files); returns its exit code (0 if OK).
int Report(const Status& status);

// Routes stdout through a filter that escapes control characters (common/text.h EscapeControl)
// except newlines and tabs: every listing (inspect, summaries, tables, lint, cache) prints names
// taken from untrusted files, and none of them may move the cursor, clear the screen or retitle
// the terminal. JSON output is unaffected (its strings are escaped already).
void EscapeStdout();

// Parses the command line. Returns -1 to go on, or the exit code to return now: 0 after --help
// or --version, 2 (one line on stderr) for a parse error, a number outside its option's range or
// a first word that is no subcommand (`quantkit nosuchcmd --help` must not print the main help and
// succeed), 70 when an option that takes a number declares no range (numeric_options.h).
int Parse(CLI::App& app, int argc, char** argv);

// --max-tensor-mb (any subcommand, like --threads): the per-tensor memory budget of model runs
// (runtime/tensor_budget.h), applied while parsing.
void AddTensorBudgetOption(CLI::App& app);

// The image preprocessing options (calibrate, eval, data, convert, qat), bound straight to the
// public struct, which the library parses (quantkit/data_source.h).
void AddImageOptions(CLI::App* cmd, ImagePreprocessing* image);

// The options of every writer of a Q/DQ model (calibrate, convert, fallback, qat): --float-dtype,
// --cast-io, --keep-fp32, --weight-storage (docs/strongly-typed.md), bound straight to the public
// struct (quantkit/calibration.h FloatPart; its `int8` is calibrate's --int8).
void AddFloatOptions(CLI::App* cmd, FloatPart* floats);

// The options analyze and fallback share: MODEL, --plan, --data, --samples, --batch-size,
// --placement and the distributed ones. `data_help` describes --data for the subcommand.
void AddPlanEvalOptions(CLI::App* cmd, PlanEvaluationOptions* options,
                        const std::string& data_help);
// A report's warnings on stderr, one line each, control characters escaped.
void PrintWarnings(const std::vector<std::string>& warnings);

}  // namespace quantkit::cli
