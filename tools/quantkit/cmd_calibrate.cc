// quantkit calibrate MODEL --data SPEC [-o DIR] [--method M] [--samples N] [--batch-size B] ...
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/calibration.h"

namespace quantkit::cli {

void SetupCalibrate(CLI::App& app, RunFn* run) {
  struct Options {
    CalibrateOptions calibrate;
    std::vector<std::string> overrides, exclude;
    std::string weights = "per-channel";
    bool quiet = false;
    bool json = false;
    CLI::Option* budget_option = nullptr;
    double budget = 0;
    std::string int8 = "on";
    std::optional<int64_t> check_samples;
    bool no_check = false;
    CLI::Option* repair_option = nullptr;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Calibrate an FP32 ONNX model on real data and write TensorRT's INT8 artifacts:\n"
      "model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt");
  cmd->add_option("model", opts->calibrate.model, "FP32 ONNX model")->required();
  cmd->add_option(
      "--data", opts->calibrate.data,
      "calibration data: NAME=FILE.npy,..., FILE.npy, FILE.npz, a directory (DIR/<input>.npy, "
      "DIR/*.npy, DIR/test_data_set_*/input_K.pb), an image folder (DIR/*.jpg or DIR/<class>/*.jpg, "
      "see --resize ...), a JSON data config (FILE.json) or fashion-mnist[:calib|val|test|train]");
  cmd->add_option("-o,--output-dir", opts->calibrate.output_dir, "directory for the artifacts");
  cmd->add_option(
         "--method", opts->calibrate.methods.method,
         "max | entropy | percentile[:P] | mse | auto (every method from one statistics pass, the best "
         "on held-out data vs FP32: --holdout, or the last quarter of --data (fashion-mnist: its val split, "
         "as many samples as --samples); then refined per tensor, at most 24 more held-out evaluations)")
      ->capture_default_str();
  cmd->add_option("--override", opts->overrides,
                  "per-tensor method, TENSOR=METHOD or OPTYPE=METHOD (op type of the consumer)");
  cmd->add_option("--exclude", opts->exclude, "node names or op types kept in float");
  cmd->add_option("--weights", opts->weights,
                  "weight scales: per-channel (TensorRT's recommendation) | per-tensor")
      ->check(CLI::IsMember({"per-channel", "per-tensor"}))
      ->capture_default_str();
  cmd->add_option("--samples", opts->calibrate.data_options.samples,
                  "use the first N samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option(
         "--batch-size", opts->calibrate.data_options.batch_size,
         "samples read at a time (a multiple of the run batch); results do not depend on it")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option(
         "--run-batch", opts->calibrate.run_batch,
         "samples per model run, cut at multiples of N in sample order, so results do not depend on "
         "--batch-size or the launch size; 1 also makes them independent of the order "
         "(default: 8 on the CPU, 128 on a GPU)")
      ->transform(InRange(1, kMaxBatch));
  cmd->add_option("--stats", opts->calibrate.stats_out, "also write the statistics (.qkstats)");
  cmd->add_option("--from-stats", opts->calibrate.from_stats,
                  "skip the model run: merge these .qkstats shards instead");
  cmd->add_option("--trt-version", opts->calibrate.cache.trt_version,
                  "TensorRT version the cache is for")
      ->capture_default_str();
  cmd->add_option("--calibrator", opts->calibrate.cache.calibrator, "cache header calibrator")
      ->capture_default_str();
  cmd->add_flag(
      "--compare-methods", opts->calibrate.compare_methods,
      "calibrate once, evaluate max/entropy/percentile:99.99/mse on --holdout, keep the best");
  opts->budget_option =
      cmd->add_option(
             "--budget", opts->budget,
             "then keep the fewest layers in float that bring INT8 within B of FP32 on held-out data (the fallback "
             "search): top1/agreement in points, rel_mse as a ratio; writes the repaired artifacts")
          ->transform(InRange(0, kMaxBudget));
  cmd->add_option(
      "--holdout", opts->calibrate.holdout,
      "held-out data for --compare-methods (default fashion-mnist:val) and --budget (default: the "
      "last quarter of --data, which calibration then leaves out), and for the accuracy check and the "
      "repair (default: the samples of --data after --samples, fashion-mnist:val, else the last of --data, "
      "which calibration then leaves out; under 16 samples its last ones, in-sample, and no repair)");
  cmd->add_option("--holdout-samples", opts->calibrate.holdout_samples,
                  "first N held-out samples (0: all)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option(
      "--metric", opts->calibrate.metric,
      "--compare-methods/--budget metric: top1, agreement, rel_mse, frame_agreement, decode_agreement (default: top1 with labels / agreement on a [batch, classes] output, else rel_mse)");
  cmd->add_option(
         "--check-samples", opts->check_samples,
         fmt::format(
             "samples of the accuracy check of the written model vs FP32 (printed in the summary, a "
             "warning beyond its thresholds; docs/accuracy.md); 0: none (default: one in {} of the "
             "calibrated samples, {} to {})",
             kCheckShareDivisor, kCheckMinSamples, kCheckMaxSamples))
      ->transform(InRange(0, kMaxCount));
  cmd->add_flag("--no-check", opts->no_check,
                "no accuracy check (--check-samples 0), hence no repair");
  opts->repair_option =
      cmd->add_option(
             "--repair", opts->calibrate.repair,
             "auto: when the check misses its target (97% agreement / 1e-2 rel MSE vs FP32 on held-out samples: "
             "--holdout, the samples after --samples, fashion-mnist:val, else the last of --data, which the "
             "calibration then leaves out), try --method auto, then --ptq smoothquant,bias-correction, then seqmse, "
             "then the fewest layers in float, and write the first that meets it (else the best: exit 1); "
             "off: the plan as asked, only checked (docs/accuracy.md)")
          ->check(CLI::IsMember({"auto", "off"}))
          ->capture_default_str();
  cmd->add_option(
         "--repair-time", opts->calibrate.repair_time_seconds,
         fmt::format(
             "seconds the repair may take in all (0: {:g}x the time to the first verdict, at "
             "least {:g} s)",
             kRepairTimeFactor, kRepairMinSeconds))
      ->transform(InRange(0.0, kMaxRepairSeconds))
      ->capture_default_str();
  cmd->add_flag(
      "--json", opts->json,
      "print the report as JSON (the check and the repair ladder; --compare-methods/auto: the table)");
  const std::string stage_help =
      "PTQ stages after the range choice, in order: NAME[:KEY=VALUE...][,NAME...] "
      "(e.g. seqmse,adaround:iterations=500). With --method auto, each stage alone and all of them are tried on "
      "held-out data and the best kept. Stages:" +
      DescribePtqStages();
  cmd->add_option("--ptq", opts->calibrate.ptq.stages, stage_help)
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty()
                       ? std::string("--ptq takes a list of stages; leave the option out for none")
                       : "";
          },
          "STAGES"));
  cmd->add_option(
         "--ptq-samples", opts->calibrate.ptq.samples,
         "calibration samples the PTQ stages fit on (the first N; fewer when --ptq-memory says so)")
      ->transform(InRange(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--ptq-batch", opts->calibrate.ptq.batch,
                  "samples per cached run batch and per AdaRound step")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option(
         "--ptq-memory", opts->calibrate.ptq.memory_mib,
         "MiB of cached layer activations the PTQ stages may hold (fewer samples beyond it)")
      ->transform(InRange(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--seed", opts->calibrate.ptq.seed, "seed of the PTQ stages' random draws")
      ->transform(InRange(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &opts->calibrate.data_options.image);
  AddFloatOptions(cmd, &opts->calibrate.floats);
  cmd->add_option("--int8", opts->int8,
                  "on | off: off writes model.<float-dtype>.onnx without Q/DQ (FP16 from data)")
      ->capture_default_str();
  AddDistributedOptions(cmd, &opts->calibrate.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      CalibrateOptions& c = opts->calibrate;
      // Without -o (or --stats, or --compare-methods' table) the whole pass would run and write
      // nothing: refuse up front.
      if (c.output_dir.empty() && c.stats_out.empty() && !c.compare_methods) {
        return Report(
            Status(StatusCode::kInvalidArgument,
                   "calibrate writes its artifacts into -o DIR (or statistics with --stats FILE); "
                   "give one of them"));
      }
      for (const std::string& o : opts->overrides) {
        const size_t eq = o.rfind('=');
        if (eq == std::string::npos || eq == 0) {
          return Report(
              Status(StatusCode::kInvalidArgument, "--override '" + o + "' is not NAME=METHOD"));
        }
        c.methods.overrides[o.substr(0, eq)] = o.substr(eq + 1);
      }
      for (const std::string& e : opts->exclude) c.placement.Exclude(e);
      c.placement.per_channel_weights = opts->weights == "per-channel";
      c.floats.int8 = opts->int8 == "on";
      if (opts->int8 != "on" && opts->int8 != "off") {
        return Report(
            Status(StatusCode::kInvalidArgument, "--int8 '" + opts->int8 + "': use on or off"));
      }
      c.progress = !opts->quiet;
      if (opts->no_check && opts->check_samples.value_or(0) != 0) {
        return Report(Status(StatusCode::kInvalidArgument,
                             "--no-check and --check-samples " +
                                 std::to_string(*opts->check_samples) + " contradict"));
      }
      c.check_samples = opts->no_check ? 0 : opts->check_samples.value_or(kAutoCheckSamples);
      // Statistics alone (--stats without -o) write no model to check; the plan is not kept.
      if (c.output_dir.empty() && !c.compare_methods) c.check_samples = 0;
      if (opts->budget_option->count() > 0) c.budget = opts->budget;
      // The repair ladder belongs to a plain calibration: the other modes are repairs of their own.
      if (opts->repair_option->count() > 0 && c.repair == "auto" &&
          (c.budget || c.compare_methods || c.methods.method == "auto")) {
        return Report(Status(
            StatusCode::kInvalidArgument,
            "--repair auto repairs a plain calibration; --budget, --compare-methods and --method "
            "auto choose the plan themselves: drop --repair"));
      }

      auto report = Calibrate(c);
      if (!report.ok()) return Report(report.status());
      std::fputs((opts->json && !report->json.empty() ? report->json + "\n" : report->text).c_str(),
                 stdout);
      // The check's warning once more on stderr, after everything: loud where stdout is a log
      // file. The exit code stays 0 (docs/accuracy.md).
      if (!report->check.warning.empty()) {
        std::fflush(stdout);
        std::fprintf(stderr, "warning: %s\n", report->check.warning.c_str());
      }
      PrintRankLine(report->rank_line);
      // Exit 1 when the budget is out of reach, as `quantkit fallback` does, or when the repair
      // ladder wrote its best rung without meeting the check's target.
      if (report->repair.ran && !report->repair.met) return 1;
      return report->within_budget.value_or(true) ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
