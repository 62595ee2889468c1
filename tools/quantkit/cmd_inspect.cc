// quantkit inspect MODEL [--json]: what a model is made of (versions, producer, inputs/outputs
// with dtypes and symbolic shapes, op histogram, weights and where they live).
#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupInspect(CLI::App& app, RunFn* run) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's versions, inputs/outputs, op histogram and weights");
  cmd->add_option("model", options->model, "ONNX model file")->required();
  cmd->add_flag("--json", options->json, "Print JSON (keys sorted) instead of text");
  cmd->callback([run, options] {
    *run = [options]() -> int {
      auto r = InspectModel(options->model);
      if (!r.ok()) return Report(r.status());
      std::fputs((options->json ? r->json : r->text).c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
