// quantkit calibrate MODEL --data SPEC [-o DIR] [--method M] [--samples N] [--batch-size B] ...
#include "cli_util.h"
#include "quantkit/calibration.h"

namespace quantkit::cli {

void SetupCalibrate(CLI::App& app, RunFn* run) {
  struct Options {
    CalibrateOptions calibrate;
    std::vector<std::string> overrides, exclude;
    std::string weights = "per-channel";
    std::string int8 = "on";
    bool quiet = false, json = false;
  };
  auto opts = std::make_shared<Options>();
  CalibrateOptions& c = opts->calibrate;
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Calibrate an FP32 ONNX model on real data and write TensorRT's INT8 artifacts:\n"
      "model.qdq.onnx, calib.cache, ranges.txt, plan.json, summary.txt");
  cmd->add_option("model", c.model, "FP32 ONNX model")->required();
  cmd->add_option(
      "--data", c.data,
      "calibration data: NAME=FILE.npy,..., FILE.npy, FILE.npz, a directory (DIR/<input>.npy, "
      "DIR/*.npy, DIR/test_data_set_*/input_K.pb), an image folder (DIR/*.jpg or "
      "DIR/<class>/*.jpg, "
      "see --resize ...), a JSON data config (FILE.json) or fashion-mnist[:calib|val|test|train]");
  cmd->add_option("-o,--output-dir", c.output_dir, "directory for the artifacts");
  cmd->add_option(
         "--method", c.methods.method,
         "max | entropy | percentile[:P] | mse | auto (every method from one statistics pass, the "
         "best "
         "on held-out data vs FP32: --holdout, or the last quarter of --data; then refined per "
         "tensor, at most 24 more held-out evaluations)")
      ->capture_default_str();
  cmd->add_option("--override", opts->overrides,
                  "per-tensor method, TENSOR=METHOD or OPTYPE=METHOD (op type of the consumer)");
  cmd->add_option("--exclude", opts->exclude, "node names or op types kept in float");
  cmd->add_option("--weights", opts->weights,
                  "weight scales: per-channel (TensorRT's recommendation) | per-tensor")
      ->check(CLI::IsMember({"per-channel", "per-tensor"}))
      ->capture_default_str();
  cmd->add_option("--samples", c.data_options.samples, "use the first N samples (0: all)")
      ->capture_default_str();
  cmd->add_option(
         "--batch-size", c.data_options.batch_size,
         "samples read at a time (a multiple of the run batch); results do not depend on it")
      ->capture_default_str();
  cmd->add_option(
      "--run-batch", c.run_batch,
      "samples per model run, cut at multiples of N in sample order, so results do not depend on "
      "--batch-size or the launch size; 1 also makes them independent of the order "
      "(default: 8 on the CPU, 128 on a GPU)");
  cmd->add_option("--stats", c.stats_out, "also write the statistics (.qkstats)");
  cmd->add_option("--from-stats", c.from_stats,
                  "skip the model run: merge these .qkstats shards instead");
  cmd->add_option("--trt-version", c.cache.trt_version, "TensorRT version the cache is for")
      ->capture_default_str();
  cmd->add_option("--calibrator", c.cache.calibrator, "cache header calibrator")
      ->capture_default_str();
  cmd->add_flag(
      "--compare-methods", c.compare_methods,
      "calibrate once, evaluate max/entropy/percentile:99.99/mse on --holdout, keep the best");
  cmd->add_option_function<double>(
      "--budget", [opts](double budget) { opts->calibrate.budget = budget; },
      "then keep the fewest layers in float that bring INT8 within B of FP32 on held-out data (the "
      "fallback "
      "search): top1/agreement in points, rel_mse as a ratio; writes the repaired artifacts");
  cmd->add_option(
      "--holdout", c.holdout.data,
      "held-out data for --compare-methods (default fashion-mnist:val) and --budget (default: the "
      "last quarter of --data, which calibration then leaves out)");
  cmd->add_option("--holdout-samples", c.holdout.samples, "first N held-out samples (0: all)");
  cmd->add_option(
      "--metric", c.holdout.metric,
      "--compare-methods/--budget metric: top1, agreement, rel_mse (default: top1 with labels / "
      "agreement on a [batch, classes] output, else rel_mse)");
  cmd->add_flag("--json", opts->json, "--compare-methods: print the table as JSON");
  cmd->add_option("--ptq", c.ptq.stages,
                  "PTQ stages after the range choice, in order: NAME[:KEY=VALUE...][,NAME...] "
                  "(e.g. seqmse,adaround:iterations=500). With --method auto, each stage alone and all of "
                  "them are tried on held-out data and the best kept. Stages:\n" +
                      DescribePtqStages());
  cmd->add_option("--ptq-samples", c.ptq.samples,
                  "calibration samples the PTQ stages fit on (the first N; fewer when --ptq-memory says so)")
      ->capture_default_str();
  cmd->add_option("--ptq-batch", c.ptq.batch, "samples per cached run batch and per AdaRound step")
      ->capture_default_str();
  cmd->add_option("--ptq-memory", c.ptq.memory_mib,
                  "MiB of cached layer activations the PTQ stages may hold (fewer samples beyond it)")
      ->capture_default_str();
  cmd->add_option("--seed", c.ptq.seed, "seed of the PTQ stages' random draws")->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddImageOptions(cmd, &c.data_options.image);
  AddFloatOptions(cmd, &c.floats);
  cmd->add_option("--int8", opts->int8, "on | off: off writes model.<float-dtype>.onnx without Q/DQ (FP16 from data)")
      ->capture_default_str();
  AddDistributedOptions(cmd, &c.distributed);
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
        if (int rc = Report(c.methods.AddOverride(o))) return rc;
      }
      for (const std::string& e : opts->exclude) c.placement.Exclude(e);
      if (opts->int8 != "on" && opts->int8 != "off") {
        return Report(Status(StatusCode::kInvalidArgument, "--int8 '" + opts->int8 + "': use on or off"));
      }
      c.int8 = opts->int8 == "on";
      c.placement.per_channel_weights = opts->weights == "per-channel";
      c.progress = !opts->quiet;
      auto r = Calibrate(c);
      if (!r.ok()) return Report(r.status());
      // Rank 0 (or the only process) wrote everything; other ranks report their shard.
      if (r->rank.rank == 0) Print(opts->json && !r->json.empty() ? r->json : r->text);
      PrintRankLine(r->rank);
      // Exit 1 when the budget is out of reach, as `quantkit fallback` does.
      return r->within_budget ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
