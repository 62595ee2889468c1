// The one rule every numeric option of the CLI follows (issue #27): a finite number inside a
// declared range, checked while the command line is parsed, before any file is opened.
//
//   cmd->add_option("--bins", opts->bins, "histogram bins")->transform(InRange(kMinBins,
//   kMaxBins));
//
// CheckNumericOptions walks every subcommand and refuses to start (exit 70: a quantkit bug) when an
// option whose value is a number (CLI11 type INT, UINT or FLOAT) declares no range, so a new option
// cannot forget one. The range shows in --help ("INT in [1, 65536]") and is what the option-walking
// test (tests/unit/cli/numeric_options_test.cc) reads as the documented acceptance.
//
// Upper bounds: where memory or time grows with the value (batch sizes, bins, resamples, steps),
// the bound is the largest value that still makes sense on one machine; elsewhere (first-N counts,
// seeds) it is the type's range and larger values mean "all".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "quantkit/calibration.h"
#include "quantkit/qat.h"
#include "quantkit/status.h"

namespace quantkit::cli {

// The name every range validator carries (what CheckNumericOptions looks for).
inline constexpr const char* kRangeValidatorName = "quantkit-range";

// A finite number in [lo, hi]. An integral value written as 1e3 is passed on as 1000 (CLI11 reads
// integers in plain notation only); NaN, Inf and text are refused with the range in the message.
CLI::Validator InRange(double lo, double hi);
// A finite number in (lo, hi]: learning rates, temperatures, tolerances (0 is not a value).
CLI::Validator AboveAndAtMost(double lo, double hi);

// Named bounds shared by several subcommands.
inline constexpr double kMaxCount = 9.2e18;         // first-N counts: any larger N means all
inline constexpr double kMaxIntCount = 2147483647;  // the same for an `int` option
inline constexpr double kMaxBatch = 65536;          // samples per read or run: memory grows with it
inline constexpr double kMaxSeed = 1.8e19;          // a uint64_t seed
inline constexpr double kMaxThreads = 1 << 20;      // capped at the usable CPUs anyway
using quantkit::kMaxBudget;  // the library's (quantkit/calibration.h): top1/agreement points,
                             // rel_mse a ratio
inline constexpr double kMaxRelativeTolerance = 1e6;
inline constexpr double kMaxPixelScale = 1e6;
inline constexpr double kMaxTrialCacheMb = 1 << 20;  // 1 TiB, in MiB
// qat: the training log keeps a record per step; learning rates and loss weights beyond these
// only make the loss overflow; a KL temperature near 0 divides the logits by ~0 (NaN losses).
inline constexpr double kMaxQatSteps = 1e7;
inline constexpr double kMaxQatEpochs = 1e5;
inline constexpr double kMaxLearningRate =
    QatOptions::kMaxLr;  // the library's bounds (quantkit/qat.h)
inline constexpr double kMinTemperature = QatOptions::kMinTemperature;
inline constexpr double kMaxTemperature = QatOptions::kMaxTemperature;
inline constexpr double kMaxLossWeight = QatOptions::kMaxLossWeight;

// Internal error naming the first numeric option (of `app` or any subcommand) without a range.
Status CheckNumericOptions(CLI::App& app);

}  // namespace quantkit::cli
