// quantkit lint MODEL [--json]: TensorRT explicit-quantization checks on a Q/DQ model.
// Exit code: 0 clean (notes only), 1 warnings, 2 errors (TensorRT will reject the model).
#include <cstdio>

#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupLint(CLI::App& app, RunFn* run) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("lint",
                         "Check a Q/DQ ONNX model for what TensorRT will reject or run slowly.\n"
                         "Exit code: 0 clean, 1 warnings, 2 errors.");
  cmd->add_option("model", opts->model, "Q/DQ ONNX model")->required();
  cmd->add_flag("--json", opts->json, "print the findings as JSON");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      const Result<LintReport> linted = Lint({opts->model});
      if (!linted.ok()) return Report(linted.status());
      std::fputs((opts->json ? linted->json : linted->text).c_str(), stdout);
      return linted->exit_code;
    };
  });
}

}  // namespace quantkit::cli
