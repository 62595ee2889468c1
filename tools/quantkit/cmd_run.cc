// quantkit run MODEL --input NAME=FILE.npy ... [--output-dir DIR] [--dump NAME,...|all]
// Runs the model through the interpreter, writes each output as .npy and prints one summary line
// per output.
#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupRun(CLI::App& app, RunFn* run) {
  struct Options {
    RunOptions run;
    std::vector<std::string> inputs, dump;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a model on .npy inputs and write its outputs as .npy");
  cmd->add_option("model", opts->run.model, "ONNX model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--input,-i", opts->inputs, "NAME=FILE.npy, once per graph input");
  cmd->add_option("--output-dir,-o", opts->run.output_dir, "directory for the .npy outputs")
      ->default_val(".");
  cmd->add_option("--dump", opts->dump,
                  "also write these intermediate tensors (comma separated), or 'all'")
      ->delimiter(',');
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      RunOptions& r = opts->run;
      for (const std::string& spec : opts->inputs) {
        const size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0) {
          return Report(Status(StatusCode::kInvalidArgument,
                               "--input '" + spec + "': expected NAME=FILE.npy"));
        }
        if (!r.inputs.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second) {
          return Report(Status(StatusCode::kInvalidArgument,
                               "--input " + spec.substr(0, eq) + " is given twice"));
        }
      }
      for (const std::string& d : opts->dump) {
        if (d == "all") {
          r.dump_all = true;
        } else {
          r.dump.push_back(d);
        }
      }
      auto result = Run(r);
      if (!result.ok()) return Report(result.status());
      Print(result->text);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
