// quantkit lint MODEL [--json]: TensorRT explicit-quantization checks on a Q/DQ model.
// Exit code: 0 clean (notes only), 1 warnings, 2 errors (TensorRT will reject the model).
#include <cstdio>

#include "analysis/qdq_lint.h"
#include "cli_util.h"

namespace quantkit::cli {

void SetupLint(CLI::App& app, RunFn* run) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "lint", "Check a Q/DQ ONNX model for what TensorRT will reject or run slowly.\n"
              "Exit code: 0 clean, 1 warnings, 2 errors.");
  cmd->add_option("model", opts->model, "Q/DQ ONNX model")->required();
  cmd->add_flag("--json", opts->json, "print the findings as JSON");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      const Result<analysis::LintReport> linted = analysis::LintModelFile(opts->model);
      if (!linted.ok()) return Report(linted.status());
      const analysis::LintReport& report = linted.value();
      const std::string text =
          opts->json ? analysis::FormatLintJson(report) : analysis::FormatLintText(report);
      std::fputs(text.c_str(), stdout);
      switch (report.Worst()) {
        case analysis::Severity::kError: return 2;
        case analysis::Severity::kWarning: return 1;
        case analysis::Severity::kInfo: return 0;
      }
      return 0;
    };
  });
}

}  // namespace quantkit::cli
