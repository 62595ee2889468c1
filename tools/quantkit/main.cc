// quantkit: INT8 calibration and quantization tooling for ONNX models deployed to TensorRT.
#include <cstdio>
#include <exception>

#include "cli_distributed.h"
#include "commands.h"
#include "runtime/threads.h"

int main(int argc, char** argv) {
  CLI::App app{
      "quantkit: calibrate ONNX models for TensorRT INT8, convert QAT models, measure accuracy.\n"
      "Run 'quantkit SUBCOMMAND --help' for the options of each subcommand."};
  app.set_version_flag("--version", "quantkit " QK_VERSION);
  app.require_subcommand(0, 1);
  // Accepted before or after the subcommand (fallthrough): quantkit calibrate ... --threads 4.
  int threads = 0;
  app.add_option("--threads", threads,
                 "compute threads for model runs (0: every CPU this process may use)")
      ->envname("QUANTKIT_THREADS")
      ->capture_default_str();
  app.fallthrough();
  quantkit::cli::RunFn run;
  quantkit::cli::RegisterCommands(app, &run);
  CLI11_PARSE(app, argc, argv);
  if (!run) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  if (quantkit::Status st = quantkit::runtime::SetComputeThreads(threads); !st.ok()) {
    std::fprintf(stderr, "quantkit: %s\n", st.ToString().c_str());
    return 2;
  }
  if (quantkit::Status st = quantkit::cli::CheckDistributedLaunch(app); !st.ok()) {
    std::fprintf(stderr, "quantkit: %s\n", st.message().c_str());
    return quantkit::ExitCodeFor(st.code());
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantkit: internal error: %s\n", e.what());
    return 70;
  }
}
