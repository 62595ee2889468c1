// quantkit calibrate MODEL --data SPEC [-o DIR] [--method M] [--samples N] [--batch-size B] ...
#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "pipelines/calibrate.h"
#include "pipelines/calibrate_budget.h"
#include "pipelines/compare_methods.h"
#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quant/method_amax.h"

namespace quantkit::cli {
namespace {

// The check's warning once more on stderr, after everything: loud where stdout is a log file.
// The exit code stays 0 (docs/accuracy.md).
void PrintCheckWarning(const pipelines::CheckResult& check) {
  if (check.warning.empty()) return;
  std::fflush(stdout);
  std::fprintf(stderr, "warning: %s\n", check.warning.c_str());
}

}  // namespace

void SetupCalibrate(CLI::App& app, RunFn* run) {
  struct Options {
    pipelines::CalibrateOptions calibrate;
    std::string method = "max";
    std::vector<std::string> overrides, exclude;
    std::string trt_version = formats::kDefaultTrtVersion;
    std::string calibrator = "EntropyCalibration2";
    std::string weights = "per-channel";
    bool quiet = false;
    bool compare = false, json = false;
    std::string holdout, metric;
    int64_t holdout_samples = 0;
    double budget = 0;
    CLI::Option* budget_option = nullptr;
    std::string ptq;
    int64_t ptq_memory_mib = pipelines::kDefaultPtqMemoryBytes >> 20;
    ImageArgs image;
    FloatArgs floats;
    std::string int8 = "on";
    std::optional<int64_t> check_samples;
    bool no_check = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Calibrate an FP32 ONNX model on real data and write TensorRT's INT8 artifacts:\n"
      "model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt");
  cmd->add_option("model", opts->calibrate.model, "FP32 ONNX model")->required();
  cmd->add_option("--data", opts->calibrate.data,
                  "calibration data: NAME=FILE.npy,..., FILE.npy, FILE.npz, a directory (DIR/<input>.npy, "
                  "DIR/*.npy, DIR/test_data_set_*/input_K.pb), an image folder (DIR/*.jpg or DIR/<class>/*.jpg, "
                  "see --resize ...), a JSON data config (FILE.json) or fashion-mnist[:calib|val|test|train]");
  cmd->add_option("-o,--output-dir", opts->calibrate.output_dir, "directory for the artifacts");
  cmd->add_option("--method", opts->method,
                  "max | entropy | percentile[:P] | mse | auto (every method from one statistics pass, the best "
                  "on held-out data vs FP32: --holdout, or the last quarter of --data; then refined per "
                  "tensor, at most 24 more held-out evaluations)")
      ->capture_default_str();
  cmd->add_option("--override", opts->overrides,
                  "per-tensor method, TENSOR=METHOD or OPTYPE=METHOD (op type of the consumer)");
  cmd->add_option("--exclude", opts->exclude, "node names or op types kept in float");
  cmd->add_option("--weights", opts->weights, "weight scales: per-channel (TensorRT's recommendation) | per-tensor")
      ->check(CLI::IsMember({"per-channel", "per-tensor"}))
      ->capture_default_str();
  cmd->add_option("--samples", opts->calibrate.samples, "use the first N samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--batch-size", opts->calibrate.batch_size,
                  "samples read at a time (a multiple of the run batch); results do not depend on it")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--run-batch", opts->calibrate.run_batch,
                  "samples per model run, cut at multiples of N in sample order, so results do not depend on "
                  "--batch-size or the launch size; 1 also makes them independent of the order "
                  "(default: 8 on the CPU, 128 on a GPU)")
      ->transform(InRange(1, kMaxBatch));
  cmd->add_option("--stats", opts->calibrate.stats_out, "also write the statistics (.qkstats)");
  cmd->add_option("--from-stats", opts->calibrate.from_stats,
                  "skip the model run: merge these .qkstats shards instead");
  cmd->add_option("--trt-version", opts->trt_version, "TensorRT version the cache is for")->capture_default_str();
  cmd->add_option("--calibrator", opts->calibrator, "cache header calibrator")->capture_default_str();
  cmd->add_flag("--compare-methods", opts->compare,
                "calibrate once, evaluate max/entropy/percentile:99.99/mse on --holdout, keep the best");
  opts->budget_option = cmd->add_option(
      "--budget", opts->budget,
      "then keep the fewest layers in float that bring INT8 within B of FP32 on held-out data (the fallback "
      "search): top1/agreement in points, rel_mse as a ratio; writes the repaired artifacts")
      ->transform(InRange(0, kMaxBudget));
  cmd->add_option("--holdout", opts->holdout,
                  "held-out data for --compare-methods (default fashion-mnist:val) and --budget (default: the "
                  "last quarter of --data, which calibration then leaves out), and for the accuracy check "
                  "(default: the samples of --data after --samples, else its last ones, called in-sample)");
  cmd->add_option("--holdout-samples", opts->holdout_samples, "first N held-out samples (0: all)")
      ->transform(InRange(0, kMaxCount));
  cmd->add_option("--metric", opts->metric, "--compare-methods/--budget metric: top1, agreement, rel_mse (default: top1 with labels / agreement on a [batch, classes] output, else rel_mse)");
  cmd->add_option("--check-samples", opts->check_samples,
                  fmt::format("samples of the accuracy check of the written model vs FP32 (printed in the summary, a "
                              "warning beyond its thresholds; docs/accuracy.md); 0: none (default: one in {} of the "
                              "calibrated samples, {} to {})",
                              pipelines::kCheckShareDivisor, pipelines::kCheckMinSamples, pipelines::kCheckMaxSamples))
      ->transform(InRange(0, kMaxCount));
  cmd->add_flag("--no-check", opts->no_check, "no accuracy check (--check-samples 0)");
  cmd->add_flag("--json", opts->json, "--compare-methods: print the table as JSON");
  std::string stage_help =
      "PTQ stages after the range choice, in order: NAME[:KEY=VALUE...][,NAME...] "
      "(e.g. seqmse,adaround:iterations=500). With --method auto, each stage alone and all of them are tried on "
      "held-out data and the best kept. Stages:";
  for (const pipelines::PtqStageInfo& st : pipelines::PtqStages()) {
    stage_help += std::string("\n  ") + st.name + ": " + st.help;
    for (const pipelines::PtqParam& p : st.params) {
      const std::string value = p.default_value < p.min ? "auto" : fmt::format("{:g}", p.default_value);
      stage_help += fmt::format("\n    {}={} in [{:g}, {:g}]: {}", p.name, value, p.min, p.max, p.help);
    }
  }
  cmd->add_option("--ptq", opts->ptq, stage_help);
  cmd->add_option("--ptq-samples", opts->calibrate.ptq.samples,
                  "calibration samples the PTQ stages fit on (the first N; fewer when --ptq-memory says so)")
      ->transform(InRange(1, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--ptq-batch", opts->calibrate.ptq.batch, "samples per cached run batch and per AdaRound step")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--ptq-memory", opts->ptq_memory_mib,
                  "MiB of cached layer activations the PTQ stages may hold (fewer samples beyond it)")
      ->transform(InRange(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--seed", opts->calibrate.ptq.seed, "seed of the PTQ stages' random draws")
      ->transform(InRange(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &opts->image);
  AddFloatOptions(cmd, &opts->floats);
  cmd->add_option("--int8", opts->int8, "on | off: off writes model.<float-dtype>.onnx without Q/DQ (FP16 from data)")
      ->capture_default_str();
  AddDistributedOptions(cmd, &opts->calibrate.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      // Without -o (or --stats, or --compare-methods' table) the whole pass would run and write
      // nothing: refuse up front.
      if (opts->calibrate.output_dir.empty() && opts->calibrate.stats_out.empty() && !opts->compare) {
        return Report(Status(StatusCode::kInvalidArgument,
                             "calibrate writes its artifacts into -o DIR (or statistics with --stats FILE); "
                             "give one of them"));
      }
      auto image = ToImageOptions(opts->image);
      if (!image.ok()) return Report(image.status());
      opts->calibrate.image = *image;
      pipelines::CalibrateOptions& c = opts->calibrate;
      // auto is a choice among the methods, made by --compare-methods' evaluation.
      const bool auto_method = opts->method == "auto";
      auto method = quant::ParseMethod(auto_method ? "max" : opts->method);
      if (!method.ok()) return Report(method.status());
      c.method = *method;
      for (const std::string& o : opts->overrides) {
        const size_t eq = o.rfind('=');
        if (eq == std::string::npos || eq == 0) {
          return Report(Status(StatusCode::kInvalidArgument, "--override '" + o + "' is not NAME=METHOD"));
        }
        auto m = quant::ParseMethod(o.substr(eq + 1));
        if (!m.ok()) return Report(m.status());
        c.method_overrides[o.substr(0, eq)] = *m;
      }
      for (const std::string& e : opts->exclude) c.placement.Exclude(e);
      auto floats = ToFloatOptions(opts->floats);
      if (!floats.ok()) return Report(floats.status());
      c.floats = *floats;
      auto storage = passes::ParseWeightStorage(opts->floats.weight_storage);
      if (!storage.ok()) return Report(storage.status());
      c.weight_storage = *storage;
      if (opts->int8 != "on" && opts->int8 != "off") {
        return Report(Status(StatusCode::kInvalidArgument, "--int8 '" + opts->int8 + "': use on or off"));
      }
      c.int8 = opts->int8 == "on";
      c.placement.per_channel_weights = opts->weights == "per-channel";
      auto version = formats::ParseTrtVersion(opts->trt_version);
      if (!version.ok()) return Report(version.status());
      auto calibrator = formats::ParseTrtCalibrator(opts->calibrator);
      if (!calibrator.ok()) return Report(calibrator.status());
      c.cache = {*version, *calibrator};
      c.progress = !opts->quiet;
      auto stages = pipelines::ParsePtqStages(opts->ptq);
      if (!stages.ok()) return Report(stages.status());
      c.ptq.stages = *stages;
      c.ptq.progress = !opts->quiet;
      if (opts->ptq_memory_mib < 1 || opts->ptq_memory_mib > (int64_t{1} << 30)) {
        return Report(Status(StatusCode::kInvalidArgument,
                             fmt::format("--ptq-memory must be in [1, {}] MiB, got {}", int64_t{1} << 30, opts->ptq_memory_mib)));
      }
      c.ptq.memory_bytes = opts->ptq_memory_mib << 20;
      if (opts->no_check && opts->check_samples.value_or(0) != 0) {
        return Report(Status(StatusCode::kInvalidArgument, "--no-check and --check-samples " +
                                                               std::to_string(*opts->check_samples) + " contradict"));
      }
      c.check.samples = opts->no_check ? 0 : opts->check_samples.value_or(pipelines::kAutoCheckSamples);
      // Statistics alone (--stats without -o) write no model to check.
      if (c.output_dir.empty() && !opts->compare) c.check.samples = 0;
      c.check.holdout = opts->holdout;
      c.check.holdout_samples = opts->holdout_samples;
      if (opts->budget_option->count() > 0) {
        if (opts->compare || auto_method) {
          return Report(Status(StatusCode::kInvalidArgument,
                               "--budget repairs one method's plan: give --method max|entropy|percentile|mse, "
                               "not --compare-methods or --method auto"));
        }
        pipelines::CalibrateBudgetOptions b;
        b.calibrate = c;
        b.budget = opts->budget;
        b.holdout = opts->holdout;
        b.holdout_samples = opts->holdout_samples;
        b.metric = opts->metric;
        auto r = pipelines::CalibrateWithinBudget(b);
        if (!r.ok()) return Report(r.status());
        std::fputs(pipelines::FormatCalibrateBudget(*r).c_str(), stdout);
        PrintCheckWarning(r->calibration.check);
        for (const std::string& f : r->calibration.written) {
          const auto& repaired = r->fallback.written;  // printed by the report, replaced by the search
          if (std::find(repaired.begin(), repaired.end(), f) == repaired.end()) std::printf("wrote %s\n", f.c_str());
        }
        // Exit 1 when the budget is out of reach, as `quantkit fallback` does.
        return r->fallback.search.within_budget ? 0 : 1;
      }
      if (opts->compare || auto_method) {
        pipelines::CompareMethodsOptions cm;
        cm.calibrate = c;
        cm.holdout = opts->holdout;
        // The zoo's own split is the default holdout for its data (a CLI default, not the library's).
        if (cm.holdout.empty() && c.data.rfind("fashion-mnist", 0) == 0) cm.holdout = "fashion-mnist:val";
        cm.holdout_samples = opts->holdout_samples;
        cm.metric = opts->metric;
        cm.per_tensor = auto_method;  // auto refines per tensor; --compare-methods is the per-model table
        auto r = pipelines::CompareMethods(cm);
        if (!r.ok()) return Report(r.status());
        if (opts->json) {
          std::printf("%s\n", pipelines::CompareMethodsJson(*r).c_str());
        } else {
          std::fputs(pipelines::FormatCompareMethods(*r).c_str(), stdout);
          std::fputs(r->best_result.summary.c_str(), stdout);
          for (const std::string& f : r->best_result.written) std::printf("wrote %s\n", f.c_str());
        }
        PrintCheckWarning(r->best_result.check);
        return 0;
      }
      auto result = pipelines::Calibrate(c);
      if (!result.ok()) return Report(result.status());
      // Rank 0 (or the only process) wrote everything; other ranks report their shard.
      if (result->rank.rank == 0) {
        std::fputs(result->summary.c_str(), stdout);
        for (const std::string& f : result->written) std::printf("wrote %s\n", f.c_str());
        PrintCheckWarning(result->check);
      }
      if (result->rank.world_size > 1) PrintRankLine(result->rank);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
