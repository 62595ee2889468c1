// quantkit run MODEL --input NAME=FILE.npy ... [--output-dir DIR] [--dump NAME,...|all]
// Runs the model through the interpreter, writes each output as .npy and prints one summary line
// per output.
#include <cstdio>
#include <memory>

#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupRun(CLI::App& app, RunFn* run) {
  auto options = std::make_shared<RunOptions>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto dump = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a model on .npy inputs and write its outputs as .npy");
  cmd->add_option("model", options->model, "ONNX model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--input,-i", *inputs, "NAME=FILE.npy, once per graph input");
  cmd->add_option("--output-dir,-o", options->output_dir, "directory for the .npy outputs")
      ->default_val(".");
  cmd->add_option("--dump", *dump,
                  "also write these intermediate tensors (comma separated), or 'all'")
      ->delimiter(',');
  cmd->callback([run, options, inputs, dump] {
    *run = [options, inputs, dump]() -> int {
      for (const std::string& spec : *inputs) {
        const size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0) {
          return Report(Status(StatusCode::kInvalidArgument,
                               "--input '" + spec + "': expected NAME=FILE.npy"));
        }
        if (!options->inputs.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second) {
          return Report(
              Status(StatusCode::kInvalidArgument,
                     "--input '" + spec + "': input '" + spec.substr(0, eq) + "' given twice"));
        }
      }
      for (const std::string& d : *dump) {
        if (d == "all") {
          options->dump_all = true;
        } else {
          options->dump.push_back(d);
        }
      }
      auto result = Run(*options);
      if (!result.ok()) return Report(result.status());
      for (const std::string& line : result->outputs) std::printf("%s\n", line.c_str());
      return 0;
    };
  });
}

}  // namespace quantkit::cli
