// quantkit: INT8 calibration and quantization tooling for ONNX models deployed to TensorRT.
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "quantkit: calibrate ONNX models for TensorRT INT8, convert QAT models, measure accuracy.\n"
      "Run 'quantkit SUBCOMMAND --help' for the options of each subcommand."};
  app.set_version_flag("--version", "quantkit " QK_VERSION);
  app.require_subcommand(0, 1);
  quantkit::cli::RunFn run;
  quantkit::cli::RegisterCommands(app, &run);
  CLI11_PARSE(app, argc, argv);
  if (!run) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantkit: internal error: %s\n", e.what());
    return 70;
  }
}
