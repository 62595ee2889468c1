// quantkit inspect MODEL [--json]: what a model is made of (versions, producer, inputs/outputs
// with dtypes and symbolic shapes, op histogram, weights and where they live).
#include "cli_util.h"
#include "quantkit/tools.h"

namespace quantkit::cli {

void SetupInspect(CLI::App& app, RunFn* run) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's versions, inputs/outputs, op histogram and weights");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_flag("--json", opts->json, "Print JSON (keys sorted) instead of text");
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = InspectModel(opts->model);
      if (!r.ok()) return Report(r.status());
      Print(opts->json ? r->json : r->text);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
