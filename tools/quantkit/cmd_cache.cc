// quantkit cache inspect FILE [--json] | diff A B [--rtol R] | check FILE --model M [--trt-version V]
// Exit code of diff and check: 0 when nothing to report, 1 when they found differences/problems;
// inspect exits 1 when a scale is unusable (NaN, Inf, negative, zero, denormal).
#include <cstdio>
#include <optional>

#include "pipelines/cache_tools.h"
#include "cli_util.h"
#include "numeric_options.h"
#include "onnx/import.h"

namespace quantkit::cli {

void SetupCache(CLI::App& app, RunFn* run) {
  struct Options {
    std::string file, other, model, trt_version, calibrator;
    bool json = false;
    double rtol = 1e-6;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cache = app.add_subcommand("cache", "Inspect, compare and check TensorRT calibration caches");
  cache->require_subcommand(1);

  CLI::App* inspect = cache->add_subcommand("inspect", "Decode a cache: header meaning, scale and amax per tensor");
  inspect->add_option("file", opts->file, "calibration cache")->required();
  inspect->add_flag("--json", opts->json, "print JSON");
  inspect->callback([run, opts] {
    *run = [opts]() -> int {
      auto cache = formats::ReadTrtCache(opts->file);
      if (!cache.ok()) return Report(cache.status());
      const std::string out = opts->json ? pipelines::InspectCacheJson(*cache) : pipelines::InspectCacheText(*cache);
      std::fputs(out.c_str(), stdout);
      return pipelines::CountBadScales(*cache) > 0 ? 1 : 0;
    };
  });

  CLI::App* diff = cache->add_subcommand("diff", "Tensors added, removed or changed between two caches");
  diff->add_option("a", opts->file, "first cache")->required();
  diff->add_option("b", opts->other, "second cache")->required();
  diff->add_option("--rtol", opts->rtol, "relative scale change reported as a difference")
      ->transform(InRange(0, kMaxRelativeTolerance))
      ->capture_default_str();
  diff->callback([run, opts] {
    *run = [opts]() -> int {
      auto a = formats::ReadTrtCache(opts->file);
      if (!a.ok()) return Report(a.status());
      auto b = formats::ReadTrtCache(opts->other);
      if (!b.ok()) return Report(b.status());
      const pipelines::CacheDiff d = pipelines::DiffCaches(*a, *b, opts->rtol);
      std::fputs(pipelines::FormatCacheDiff(d, *a, *b).c_str(), stdout);
      return d.empty() ? 0 : 1;
    };
  });

  CLI::App* check = cache->add_subcommand("check", "Check a cache against a model and a TensorRT version");
  check->add_option("file", opts->file, "calibration cache")->required();
  check->add_option("--model", opts->model, "ONNX model the cache is for")->required();
  check->add_option("--trt-version", opts->trt_version, "TensorRT version that will read the cache");
  check->add_option("--calibrator", opts->calibrator, "calibrator the build uses (EntropyCalibration2 | MinMaxCalibration)");
  check->callback([run, opts] {
    *run = [opts]() -> int {
      auto cache = formats::ReadTrtCache(opts->file);
      if (!cache.ok()) return Report(cache.status());
      auto model = onnx_io::ImportModel(opts->model);
      if (!model.ok()) return Report(model.status());
      std::optional<formats::TrtVersion> version;
      if (!opts->trt_version.empty()) {
        auto v = formats::ParseTrtVersion(opts->trt_version);
        if (!v.ok()) return Report(v.status());
        version = *v;
      }
      std::optional<formats::TrtCalibrator> calibrator;
      if (!opts->calibrator.empty()) {
        auto c = formats::ParseTrtCalibrator(opts->calibrator);
        if (!c.ok()) return Report(c.status());
        calibrator = *c;
      }
      auto result = pipelines::CheckCache(*cache, *model->graph, version, calibrator);
      if (!result.ok()) return Report(result.status());
      std::fputs(pipelines::FormatCacheCheck(*result).c_str(), stdout);
      return result->ok() ? 0 : 1;
    };
  });
}

}  // namespace quantkit::cli
