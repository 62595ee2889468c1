// quantkit diagnose MODEL --data SPEC [--reference-data SPEC] [--expect ...] [-o DIR] [--json]
#include <cstdio>

#include "cli_distributed.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupDiagnose(CLI::App& app, RunFn* run) {
  struct Options {
    DiagnoseOptions diagnose;
    std::vector<std::string> exclude;
    bool json = false, quiet = false, strict = false;
  };
  auto opts = std::make_shared<Options>();
  DiagnoseOptions& d = opts->diagnose;
  CLI::App* cmd = app.add_subcommand(
      "diagnose",
      "Calibration-data diagnostics: are the samples enough and stable, representative of a reference "
      "set, preprocessed as the model expects, batch-independent; degenerate tensors and the method to "
      "use per tensor. Text report (or --json); -o DIR adds report.json, report.txt and SVG pictures");
  cmd->add_option("model", d.model, "FP32 ONNX model")->required();
  cmd->add_option("--data", d.data, "calibration data (same specs as calibrate)")->required();
  cmd->add_option("--reference-data", d.reference_data,
                  "validation / production data to compare with");
  cmd->add_option(
      "--expect", d.expect,
      "declared model-input expectation: range=LO:HI and/or mean=M[/M..],std=S[/S..] (per channel)");
  cmd->add_option("--method", d.method,
                  "the method calibrate will use: max | entropy | percentile[:P] | mse")
      ->capture_default_str();
  cmd->add_option("--samples", d.samples, "use the first N calibration samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--reference-samples", d.reference_samples,
                  "use the first N reference samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--batch-size", d.batch_size, "samples per model run")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--chunks", d.chunks,
                  "collector sets kept (resolution of curves and bootstrap; memory grows with it)")
      ->transform(InRange(1, kMaxDiagnoseChunks))
      ->capture_default_str();
  cmd->add_option("--bootstrap", d.bootstrap, "bootstrap resamples (0: none)")
      ->transform(InRange(0, kMaxDiagnoseResamples))
      ->capture_default_str();
  cmd->add_option("--subsets", d.subsets, "random half-subsets for the stability CV (0: none)")
      ->transform(InRange(0, kMaxDiagnoseResamples))
      ->capture_default_str();
  cmd->add_option("--seed", d.seed, "seed of the resampling")
      ->transform(InRange(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option("--tolerance", d.ci_tolerance,
                  "wanted 95% interval half-width of each scale (relative)")
      ->transform(AboveAndAtMost(0, 1))
      ->capture_default_str();
  cmd->add_option("--cv-tolerance", d.cv_tolerance,
                  "coefficient of variation above which a scale is unstable")
      ->transform(AboveAndAtMost(0, 1))
      ->capture_default_str();
  cmd->add_option("--batch-check-samples", d.batch_check_samples,
                  "samples run at batch 1 and batch B to measure batch dependence (0: skip)")
      ->transform(InRange(0, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--exclude", opts->exclude,
                  "node names or op types kept in float (as calibrate)");
  cmd->add_option("-o,--output-dir", d.output_dir,
                  "write report.json, report.txt and SVG pictures here");
  cmd->add_flag("--json", opts->json, "print the JSON report instead of the text");
  cmd->add_flag("--strict", opts->strict, "exit 1 when the data is not clean (errors or warnings)");
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress bar");
  AddDistributedOptions(cmd, &d.distributed);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      DiagnoseOptions& o = opts->diagnose;
      for (const std::string& e : opts->exclude) o.placement.Exclude(e);
      o.progress = !opts->quiet;
      auto r = Diagnose(o);
      if (!r.ok()) return Report(r.status());
      // Under a launch rank 0 has the whole report and prints it; every rank prints its line.
      PrintRankLine(r->rank_line);
      if (r->rank != 0) return 0;
      std::fputs((opts->json ? r->json : r->text).c_str(), stdout);
      return opts->strict && !r->clean ? 1 : 0;
    };
  });
}

}  // namespace quantkit::cli
