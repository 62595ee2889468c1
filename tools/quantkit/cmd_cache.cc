// quantkit cache inspect FILE [--json] | diff A B [--rtol R] | check FILE --model M [--trt-version
// V] Exit code of diff and check: 0 when nothing to report, 1 when they found differences/problems;
// inspect exits 1 when a scale is unusable (NaN, Inf, negative, zero, denormal).
#include <cstdio>
#include <optional>

#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupCache(CLI::App& app, RunFn* run) {
  struct Options {
    std::string file, other, model, trt_version, calibrator;
    bool json = false;
    double rtol = 1e-6;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cache =
      app.add_subcommand("cache", "Inspect, compare and check TensorRT calibration caches");
  cache->require_subcommand(1);

  CLI::App* inspect =
      cache->add_subcommand("inspect", "Decode a cache: header meaning, scale and amax per tensor");
  inspect->add_option("file", opts->file, "calibration cache")->required();
  inspect->add_flag("--json", opts->json, "print JSON");
  inspect->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = InspectCache(opts->file);
      if (!r.ok()) return Report(r.status());
      std::fputs((opts->json ? r->json : r->text).c_str(), stdout);
      return r->problems > 0 ? 1 : 0;
    };
  });

  CLI::App* diff =
      cache->add_subcommand("diff", "Tensors added, removed or changed between two caches");
  diff->add_option("a", opts->file, "first cache")->required();
  diff->add_option("b", opts->other, "second cache")->required();
  diff->add_option("--rtol", opts->rtol, "relative scale change reported as a difference")
      ->transform(InRange(0, kMaxRelativeTolerance))
      ->capture_default_str();
  diff->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = DiffCaches(opts->file, opts->other, opts->rtol);
      if (!r.ok()) return Report(r.status());
      std::fputs(r->text.c_str(), stdout);
      return r->problems > 0 ? 1 : 0;
    };
  });

  CLI::App* check =
      cache->add_subcommand("check", "Check a cache against a model and a TensorRT version");
  check->add_option("file", opts->file, "calibration cache")->required();
  check->add_option("--model", opts->model, "ONNX model the cache is for")->required();
  check->add_option("--trt-version", opts->trt_version,
                    "TensorRT version that will read the cache");
  check->add_option("--calibrator", opts->calibrator,
                    "calibrator the build uses (EntropyCalibration2 | MinMaxCalibration)");
  check->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = CheckCache({opts->file, opts->model, opts->trt_version, opts->calibrator});
      if (!r.ok()) return Report(r.status());
      std::fputs(r->text.c_str(), stdout);
      return r->problems > 0 ? 1 : 0;
    };
  });
}

}  // namespace quantkit::cli
