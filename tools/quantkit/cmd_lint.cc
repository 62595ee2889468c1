// quantkit lint MODEL [--json]: TensorRT explicit-quantization checks on a Q/DQ model.
// Exit code: 0 clean (notes only), 1 warnings, 2 errors (TensorRT will reject the model).
#include "cli_util.h"
#include "quantkit/tools.h"

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
      auto r = LintModel(opts->model);
      if (!r.ok()) return Report(r.status());
      Print(opts->json ? r->json : r->text);
      return r->errors > 0 ? 2 : r->warnings > 0 ? 1 : 0;
    };
  });
}

}  // namespace quantkit::cli
