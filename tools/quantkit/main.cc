// quantkit: INT8 calibration and quantization tooling for ONNX models deployed to TensorRT.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "device_option.h"
#include "quantkit/options.h"
#include "quantkit/text.h"

namespace {

// Under a distributed launch (WORLD_SIZE > 1) only these subcommands share the work; any other
// would run N copies writing the same outputs, so it is refused (kUnsupported).
quantkit::Status CheckDistributedLaunch(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return quantkit::Status::Ok();
  const std::string name = chosen.front()->get_name();
  for (const char* shared : {"calibrate", "eval", "analyze", "fallback", "qat", "diagnose"}) {
    if (name == shared) return quantkit::Status::Ok();
  }
  return quantkit::RefuseUnderLaunch(
      "`quantkit " + name + "`",
      "only calibrate, eval, analyze, diagnose, fallback and qat share work across ranks");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "quantkit: calibrate ONNX models for TensorRT INT8, convert QAT models, measure accuracy.\n"
      "Run 'quantkit SUBCOMMAND --help' for the options of each subcommand."};
  app.set_version_flag("--version", "quantkit " QK_VERSION);
  app.require_subcommand(0, 1);
  // Accepted before or after the subcommand (fallthrough): quantkit calibrate ... --threads 4.
  int threads = 0;
  app.add_option("--threads", threads,
                 "compute threads for model runs (0: every CPU this process may use; capped there)")
      ->envname("QUANTKIT_THREADS")
      ->capture_default_str();
  app.fallthrough();
  quantkit::cli::RunFn run;
  quantkit::cli::RegisterCommands(app, &run);
  std::string device = "cpu";
  quantkit::cli::AddDeviceOptions(app, &device);
  // Parse errors and unknown subcommands are bad input (exit 2), as documented; only --help and
  // --version exit 0.
  if (const int code = quantkit::cli::Parse(app, argc, argv); code >= 0) return code;
  quantkit::cli::EscapeStdout();
  if (!run) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  const quantkit::Result<int> used = quantkit::SetComputeThreads(threads);
  if (!used.ok()) return quantkit::cli::Report(used.status());
  if (threads > used.value()) {
    std::fprintf(stderr, "quantkit: warning: --threads %d exceeds the %d usable CPUs; using %d\n",
                 threads, used.value(), used.value());
  }
  for (quantkit::Status st :
       {CheckDistributedLaunch(app), quantkit::cli::ApplyDeviceOption(app, device)}) {
    if (st.ok()) continue;
    std::fprintf(stderr, "quantkit: %s\n", st.message().c_str());
    return quantkit::ExitCodeFor(st.code());
  }
  try {
    return run();
  } catch (const std::bad_alloc&) {
    return quantkit::cli::Report(
        quantkit::Status(quantkit::StatusCode::kResourceExhausted, "out of memory"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantkit: internal error: %s\n",
                 quantkit::EscapeControl(e.what()).c_str());
    return 70;
  }
}
