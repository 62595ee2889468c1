// quantkit: INT8 calibration and quantization tooling for ONNX models deployed to TensorRT.
#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "cli_distributed.h"
#include "commands.h"
#include "device_option.h"
#include "numeric_options.h"
#include "quantkit/runtime.h"

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
      ->check(quantkit::cli::InRange(0, quantkit::cli::kMaxThreads))
      ->capture_default_str();
  quantkit::cli::AddTensorBudgetOption(app);
  std::string profile_path;
  app.add_option(
         "--profile", profile_path,
         "write a Chrome trace of the command (every ATen op; on a GPU also the CUDA kernels and "
         "copies; one scope per model node) to FILE: where the time goes (docs/gpu.md)")
      ->envname("QUANTKIT_PROFILE");
  app.fallthrough();
  quantkit::cli::RunFn run;
  quantkit::cli::RegisterCommands(app, &run);
  std::string device = "cpu";
  quantkit::cli::AddDeviceOptions(app, &device);
  // Parse errors and unknown subcommands are bad input (exit 2), as documented; only --help and
  // --version exit 0.
  if (const int code = quantkit::cli::Parse(app, argc, argv); code >= 0) return code;
  quantkit::cli::EscapeStdout();
  quantkit::InstallSignalCleanup();  // Ctrl-C / SIGTERM remove this run's staging and temp files
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
  for (quantkit::Status st : {quantkit::cli::CheckDistributedLaunch(app),
                              quantkit::cli::ApplyDeviceOption(app, device)}) {
    if (st.ok()) continue;
    std::fprintf(stderr, "quantkit: %s\n", st.message().c_str());
    return quantkit::ExitCodeFor(st.code());
  }
  quantkit::Profile profile;
  if (!profile_path.empty()) {
    quantkit::Result<quantkit::Profile> started = quantkit::Profile::Start(profile_path);
    if (!started.ok()) return quantkit::cli::Report(started.status());
    profile = std::move(started).value();
  }
  int code = 70;
  try {
    code = run();
  } catch (const std::bad_alloc&) {
    code = quantkit::cli::Report(
        quantkit::Status(quantkit::StatusCode::kResourceExhausted, "out of memory"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantkit: internal error: %s\n",
                 quantkit::EscapeControl(e.what()).c_str());
  }
  if (profile.valid()) {
    // Written whatever the command's outcome (a failing run is worth a look too); its exit code
    // stays.
    const quantkit::Status written = profile.Finish();
    if (!written.ok()) {
      std::fprintf(stderr, "quantkit: warning: %s\n", written.message().c_str());
    } else {
      std::fprintf(stderr, "quantkit: profile written to %s\n",
                   quantkit::EscapeControl(profile_path).c_str());
    }
  }
  return code;
}
